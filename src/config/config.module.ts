import { DynamicModule, Global, Module } from '@nestjs/common';
import { Clock, SystemClock } from '../common/clock.js';
import type { AppConfig } from './app-config.js';
import { Environments } from './environments.js';

export const APP_CONFIG = Symbol('APP_CONFIG');

@Global()
@Module({})
export class ConfigModule {
  static forRoot(config: AppConfig, clock: Clock = new SystemClock()): DynamicModule {
    return {
      module: ConfigModule,
      providers: [
        { provide: APP_CONFIG, useValue: config },
        { provide: Clock, useValue: clock },
        { provide: Environments, useValue: new Environments(config.environments) },
      ],
      exports: [APP_CONFIG, Clock, Environments],
    };
  }
}
