import { Module } from '@nestjs/common';
import { RoutingModule } from '../routing/routing.module.js';
import { TenantsModule } from '../tenants/tenants.module.js';
import { FacadeController } from './facade.controller.js';
import { FacadeService } from './facade.service.js';
import { FacadeFastLane } from './fast-lane.js';

@Module({
  imports: [RoutingModule, TenantsModule],
  controllers: [FacadeController],
  providers: [FacadeService, FacadeFastLane],
})
export class FacadeModule {}
