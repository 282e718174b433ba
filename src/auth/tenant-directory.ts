import { Injectable, OnApplicationBootstrap } from '@nestjs/common';

/**
 * What the tenant rule needs to know of tenants: whether one exists. Auth sits below the tenants module (its
 * routes use this module's guard, decorators and keys), so it cannot ask them directly: the tenants module
 * registers the answer when it is built (`TenantsModule`). Without one the app does not start, and a check
 * that ran anyway would fail closed.
 */
@Injectable()
export class TenantDirectory implements OnApplicationBootstrap {
  private lookup: ((id: string) => Promise<boolean>) | null = null;

  register(lookup: (id: string) => Promise<boolean>): void {
    this.lookup = lookup;
  }

  exists(id: string): Promise<boolean> {
    if (this.lookup === null) throw new Error('No tenant directory is registered: the tenants module was not built.');
    return this.lookup(id);
  }

  onApplicationBootstrap(): void {
    if (this.lookup === null) throw new Error('No tenant directory is registered: import TenantsModule with AuthModule.');
  }
}
