import { SANDBOX_COMPANY } from './seed.js';
import type { SandboxUserSeed } from './types.js';

export interface SandboxUser extends SandboxUserSeed {
  readonly companyId: string;
}

export class UserDirectory {
  private readonly byId = new Map<string, SandboxUser>();

  constructor(seeds: readonly SandboxUserSeed[]) {
    for (const seed of seeds) this.byId.set(seed.id, Object.freeze({ ...seed, companyId: SANDBOX_COMPANY.id }));
  }

  get(id: string): SandboxUser | undefined {
    return this.byId.get(id);
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  list(): SandboxUser[] {
    return [...this.byId.values()];
  }

  seeds(): SandboxUserSeed[] {
    return this.list().map(({ id, email, username, name, isAdmin }) => ({ id, email, username, name, isAdmin }));
  }
}
