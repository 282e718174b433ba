import { Module } from '@nestjs/common';
import { RoutingModule } from '../routing/routing.module.js';
import { FacadeController } from './facade.controller.js';
import { FacadeService } from './facade.service.js';

@Module({
  imports: [RoutingModule],
  controllers: [FacadeController],
  providers: [FacadeService],
})
export class FacadeModule {}
