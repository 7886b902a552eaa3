/** Picks the storage driver the config names (see driverOf: the embedded `fs` store by default). */
import type { Keys } from '../../../core/keys.ts';
import type { Logger } from '../../../core/logger.ts';
import { driverOf, type StoragePluginConfig } from '../config.ts';
import type { QuotaPolicy, StorageDriver } from './types.ts';

export interface DriverEnv {
  /** The server's data dir (`fs`: objects and the generated root key live there). */
  dataDir: string;
  keys: Keys;
  log: Logger;
  /** App limits and reservations, for drivers that enforce the limit on their own writes (`fs`). */
  quota?: QuotaPolicy;
}

/** Loads only the driver in use: the AWS SDK behind `s3` alone costs more start-up than the rest. */
export async function createDriver(config: StoragePluginConfig, env: DriverEnv): Promise<StorageDriver> {
  switch (driverOf(config)) {
    case 's3':
      return (await import('./s3.ts')).createS3Driver(config.s3);
    case 'fs':
      return (await import('./fs/index.ts')).createFsDriver(config.fs, env);
  }
}
