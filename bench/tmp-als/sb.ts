import { SandboxServer } from 'cws-sandbox';
const s = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/cb'], port: 4129 });
console.log(s.url, s.issueTokens('alice').access_token);
setInterval(() => {}, 1e6);
