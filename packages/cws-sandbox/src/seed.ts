import type { SandboxUserSeed } from './types.js';

/** The sandbox emulates one company; every seeded user belongs to it. */
export const SANDBOX_COMPANY = Object.freeze({ id: 'company-1', name: 'Acme Legal' });

export function defaultUsers(): SandboxUserSeed[] {
  return [
    { id: 'admin', email: 'admin@acme.example', username: 'admin', name: 'Ada Admin', isAdmin: true },
    { id: 'alice', email: 'alice@acme.example', username: 'alice', name: 'Alice Archer', isAdmin: false },
    { id: 'bob', email: 'bob@acme.example', username: 'bob', name: 'Bob Baker', isAdmin: false },
    { id: 'carol', email: 'carol@acme.example', username: 'carol', name: 'Carol Chen', isAdmin: false },
    { id: 'dave', email: 'dave@acme.example', username: 'dave', name: 'Dave Diaz', isAdmin: false },
  ];
}

export const DEFAULT_SCOPES: readonly string[] = ['workflows.read', 'workflows.write', 'webhooks.manage', 'userinfo.read'];

/** A few workflows for a person trying the sandbox in a browser (option seedWorkflows; off by default). */
export const DEMO_WORKFLOWS: ReadonlyArray<{ name: string; creator: string; approvers: string[]; step: 'Create' | 'Review' | 'Sign' }> = [
  { name: 'Master services agreement – Globex', creator: 'alice', approvers: ['bob', 'carol'], step: 'Review' },
  { name: 'Mutual NDA – Initech', creator: 'bob', approvers: ['alice'], step: 'Create' },
  { name: 'Supplier contract – Umbrella', creator: 'admin', approvers: ['dave'], step: 'Sign' },
];
