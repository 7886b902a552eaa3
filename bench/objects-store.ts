/**
 * The embedded store's S3 endpoint alone, as a process of its own for bench/objects.ts (so that
 * it can be pinned and profiled like the other servers under test). Prints its URL on stdout.
 * Usage: node bench/objects-store.ts OBJECTS_DIR REGION ACCESS_KEY SECRET_KEY
 */
import { createLogger } from '../core/logger.ts';
import { startStandaloneStore } from '../plugins/storage/drivers/fs/index.ts';

const [objectsDir, region, accessKey, secretKey] = process.argv.slice(2);
const store = await startStandaloneStore({
  objectsDir: objectsDir!,
  listen: '127.0.0.1:0',
  region: region!,
  root: { accessKey: accessKey!, secretKey: secretKey! },
  log: createLogger('silent'),
});
process.stdout.write(`${store.url}\n`);
process.once('SIGTERM', () => void store.close().then(() => process.exit(0)));
