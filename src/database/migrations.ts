import { CreateTenants1763776800000 } from '../../migrations/1763776800000-CreateTenants.js';
import { CreateConnections1763776900000 } from '../../migrations/1763776900000-CreateConnections.js';
import { CreateEvents1763777000000 } from '../../migrations/1763777000000-CreateEvents.js';
import { ConnectionChangeNotify1795313268226 } from '../../migrations/1795313268226-ConnectionChangeNotify.js';
import { CreateWebhookReceivers1795313322858 } from '../../migrations/1795313322858-CreateWebhookReceivers.js';
import { ConnectionsFillfactor1795316400000 } from '../../migrations/1795316400000-ConnectionsFillfactor.js';
import { GroupedConnectionChanges1795400000000 } from '../../migrations/1795400000000-GroupedConnectionChanges.js';
import { ConnectSessionBrowserBinding1796100000000 } from '../../migrations/1796100000000-ConnectSessionBrowserBinding.js';
import { CreateVaultKeyChecks1796200000000 } from '../../migrations/1796200000000-CreateVaultKeyChecks.js';
import { DeferredRenewalNotify1796200000001 } from '../../migrations/1796200000001-DeferredRenewalNotify.js';
import { ConnectionPagingAndHealth1796400000000 } from '../../migrations/1796400000000-ConnectionPagingAndHealth.js';
import { EventReplayAndTargets1796400000100 } from '../../migrations/1796400000100-EventReplayAndTargets.js';
import { CreateConsoleSessions1796500000000 } from '../../migrations/1796500000000-CreateConsoleSessions.js';
import { ConnectSessionDisplay1796600000000 } from '../../migrations/1796600000000-ConnectSessionDisplay.js';
import { EventTraceparent1796800000000 } from '../../migrations/1796800000000-EventTraceparent.js';
import { EventCommitOrder1796900000000 } from '../../migrations/1796900000000-EventCommitOrder.js';
import { EventRetention1797000000000 } from '../../migrations/1797000000000-EventRetention.js';
import { CreateAuditLog1797200000000 } from '../../migrations/1797200000000-CreateAuditLog.js';
import { TenantsPaging1797300000000 } from '../../migrations/1797300000000-TenantsPaging.js';
import { EventPayloadDigest1797400000000 } from '../../migrations/1797400000000-EventPayloadDigest.js';
import { EventDeliveryFence1797500000000 } from '../../migrations/1797500000000-EventDeliveryFence.js';
import { EventsPageFunction1797600000000 } from '../../migrations/1797600000000-EventsPageFunction.js';
import { LeaseUpdatesSkipChangeCompare1797600000001 } from '../../migrations/1797600000001-LeaseUpdatesSkipChangeCompare.js';
import { CreateAuthFailures1797700000000 } from '../../migrations/1797700000000-CreateAuthFailures.js';
import { CreateAgentSessions1797800000000 } from '../../migrations/1797800000000-CreateAgentSessions.js';
import { UpstreamQuotas1797900000000 } from '../../migrations/1797900000000-UpstreamQuotas.js';
import { QuotaSlidingLog1798000000000 } from '../../migrations/1798000000000-QuotaSlidingLog.js';
import { CreateVaultInstances1798100000000 } from '../../migrations/1798100000000-CreateVaultInstances.js';
import { CreateSyncedRecords1798200000000 } from '../../migrations/1798200000000-CreateSyncedRecords.js';
import { SyncListingProgress1798200000001 } from '../../migrations/1798200000001-SyncListingProgress.js';
import { CreateEventEndpoints1798300000000 } from '../../migrations/1798300000000-CreateEventEndpoints.js';
import { CreateTenantKeys1798400000000 } from '../../migrations/1798400000000-CreateTenantKeys.js';
import { CreateTenantKeks1798500000000 } from '../../migrations/1798500000000-CreateTenantKeks.js';
import { TenantKeyDestroyNotify1798510000000 } from '../../migrations/1798510000000-TenantKeyDestroyNotify.js';
import { TenantKeyReseals1798540000000 } from '../../migrations/1798540000000-TenantKeyReseals.js';

/**
 * Every migration, in order. Listed explicitly (no glob) so that the same list works compiled, under
 * tsx and under jest.
 */
export const MIGRATIONS = [
  CreateTenants1763776800000,
  CreateConnections1763776900000,
  CreateEvents1763777000000,
  ConnectionChangeNotify1795313268226,
  CreateWebhookReceivers1795313322858,
  ConnectionsFillfactor1795316400000,
  GroupedConnectionChanges1795400000000,
  ConnectSessionBrowserBinding1796100000000,
  CreateVaultKeyChecks1796200000000,
  DeferredRenewalNotify1796200000001,
  ConnectionPagingAndHealth1796400000000,
  EventReplayAndTargets1796400000100,
  CreateConsoleSessions1796500000000,
  ConnectSessionDisplay1796600000000,
  EventTraceparent1796800000000,
  EventCommitOrder1796900000000,
  EventRetention1797000000000,
  CreateAuditLog1797200000000,
  TenantsPaging1797300000000,
  EventPayloadDigest1797400000000,
  EventDeliveryFence1797500000000,
  EventsPageFunction1797600000000,
  LeaseUpdatesSkipChangeCompare1797600000001,
  CreateAuthFailures1797700000000,
  CreateAgentSessions1797800000000,
  UpstreamQuotas1797900000000,
  QuotaSlidingLog1798000000000,
  CreateVaultInstances1798100000000,
  CreateSyncedRecords1798200000000,
  SyncListingProgress1798200000001,
  CreateEventEndpoints1798300000000,
  CreateTenantKeys1798400000000,
  CreateTenantKeks1798500000000,
  TenantKeyDestroyNotify1798510000000,
  TenantKeyReseals1798540000000,
];
