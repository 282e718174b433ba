import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { FacadeService } from './facade.service.js';
import { FacadeDoor } from './facade-door.js';

/** The facade's routes are served by FacadeDoor through the front door (edge/front-door.ts), not by a controller. */
@Module({
  imports: [RoutingModule, AuthModule],
  providers: [FacadeService, FacadeDoor],
  exports: [FacadeDoor],
})
export class FacadeModule {}
