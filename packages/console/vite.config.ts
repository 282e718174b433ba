import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// Relative asset paths: the service serves the page at <its path>/console/, behind any path prefix.
export default defineConfig({
  base: './',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // Everything the page needs ships in these files: no CDN, no external font, works offline.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: 'es2022',
    sourcemap: false,
  },
});
