import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { MIGRATION_NAMES } from '../database/migrate.js';

@Injectable()
export class OpsRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  async ping(): Promise<void> {
    await this.db.query('SELECT 1');
  }

  async pendingMigrations(): Promise<string[]> {
    const rows: Array<{ name: string }> = await this.db.query('SELECT name FROM migrations');
    const applied = new Set(rows.map((r) => r.name));
    return MIGRATION_NAMES.filter((n) => !applied.has(n));
  }
}
