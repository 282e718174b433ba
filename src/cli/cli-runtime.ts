import type { INestApplicationContext, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { AppConfig } from '../config/app-config.js';
import type { EmbeddedDatabase } from '../database/embedded-postgres.js';
import { openDatabase } from '../database/open-database.js';
import { CliModule } from './cli.module.js';

/** One operator command: `npm run cli -- <name> [args]`. Register it in the list in src/cli.ts. */
export interface CliCommand {
  name: string;
  /** One line for `help`. */
  summary: string;
  /** Runs with the database up and migrated; returns the exit code. */
  run(runtime: CliRuntime, args: string[]): Promise<number>;
}

/** Diagnostics go to stderr, so that a command's stdout holds only its result. */
export function log(message: string): void {
  process.stderr.write(`[cws-connect] ${message}\n`);
}

/**
 * What a command runs in: the database (the embedded one when DATABASE_URL is unset), migrated, and a
 * Nest application context of CliModule, created only if the command asks for a provider.
 */
export class CliRuntime {
  private context: INestApplicationContext | null = null;

  private constructor(
    readonly config: AppConfig,
    readonly appliedMigrations: string[],
    /** Aborted on the first Ctrl-C: long commands stop at their next safe point. */
    readonly signal: AbortSignal,
    private readonly embedded: EmbeddedDatabase | null,
  ) {}

  static async start(base: AppConfig, signal: AbortSignal): Promise<CliRuntime> {
    const { config, applied, embedded } = await openDatabase(base, log);
    return new CliRuntime(config, applied, signal, embedded);
  }

  async get<T>(type: Type<T>): Promise<T> {
    // abortOnError false: a failed boot must reach our error message, not process.abort().
    this.context ??= await NestFactory.createApplicationContext(CliModule.forRoot(this.config), { logger: false, abortOnError: false });
    return this.context.get(type);
  }

  async close(): Promise<void> {
    try {
      await this.context?.close();
    } finally {
      // embedded-postgres waits for an 'exit' event that never comes when the server is already gone (a
      // Ctrl-C in the terminal reaches it too): don't hang on it.
      if (this.embedded) await Promise.race([this.embedded.stop(), new Promise((r) => setTimeout(r, 10_000).unref())]);
    }
  }
}
