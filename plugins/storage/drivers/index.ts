/** Picks the storage driver the config names. */
import type { StoragePluginConfig } from '../config.ts';
import { createS3Driver } from './s3.ts';
import type { StorageDriver } from './types.ts';

export function createDriver(config: StoragePluginConfig): StorageDriver {
  switch (config.driver) {
    case 's3':
      return createS3Driver(config.s3);
  }
}
