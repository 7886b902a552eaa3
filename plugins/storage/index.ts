/**
 * The storage plugin: apps of an organization, each with its own bucket; file records; two-phase
 * presigned uploads; storage limits as quotas (./quota.ts); presigned downloads; the reaper of
 * abandoned uploads and, on the s3 driver, the usage reconciliation (./reconcile.ts).
 * Objects live behind a driver (`s3` today). With no store configured the plugin still starts:
 * /readyz reports it not ready and operations that need the store answer 503 naming the missing
 * settings.
 */
import { definePlugin } from '../../core/plugin.ts';
import { driverProblems, storageConfig } from './config.ts';
import { createDriver } from './drivers/index.ts';
import { migrations } from './migrations.ts';
import { AppQuotas } from './quota.ts';
import { UsageReconciler } from './reconcile.ts';
import { appRoutes } from './routes/apps.ts';
import { dashboardSession } from './routes/common.ts';
import { fileRoutes } from './routes/files.ts';
import { appRecord, Storage, storeFailure } from './service.ts';
import { StorageStore } from './store.ts';
import type { StorageService } from './types.ts';

export default definePlugin({
  name: 'storage',
  description: 'Apps, their buckets on an S3-compatible store, file records, presigned uploads and downloads.',
  config: storageConfig,
  engines: ['sqlite', 'postgres'],
  validate: driverProblems,
  migrations,
  async setup({ config, core, keys, data, auth, api, log, every }) {
    api.scheme('dashboardSession', { type: 'apiKey', in: 'cookie', name: '__session', description: 'A signed-in dashboard session.' });
    api.scheme('appToken', { type: 'http', scheme: 'bearer', description: "An app's API token (svc_live_...)." });
    const store = new StorageStore(data);
    const quotas = new AppQuotas(store, log);
    const driver = await createDriver(config, { dataDir: core.server.data_dir, keys, log, quota: quotas });
    try {
      await driver.start?.();
    } catch (err) {
      driver.close();
      throw err;
    }
    const storage = new Storage(store, driver, config, log, quotas);
    const deps = { store, storage };

    const notices: string[] = [];
    if (driver.publicUrl) notices.push(`Embedded S3 endpoint (the apps' buckets) listening on ${driver.publicUrl}`);
    if (driver.problem) {
      log.warn({ driver: driver.name }, driver.problem);
      notices.push(`${driver.problem}. Until then /readyz reports storage not ready and apps cannot be created.`);
    } else {
      driver.ping().catch((err: unknown) => log.warn({ err }, 'the object store does not answer yet; storage operations will answer 503 until it does'));
    }

    every('upload-reaper', config.reaper_interval_seconds * 1000, () => storage.reap());
    const expireUploads = driver.expireUploads?.bind(driver);
    if (expireUploads) every('multipart-expiry', 10 * 60 * 1000, () => expireUploads());
    const reconciler = new UsageReconciler(store, driver, log);
    if (reconciler.needed) every('usage-reconciliation', config.usage_interval_seconds * 1000, () => reconciler.run());

    const service: StorageService = {
      credentials: { dashboardSession },
      async getApp(appId) {
        const app = await store.app(appId);
        return app && appRecord(app);
      },
      async getAppInOrg(appId, orgId) {
        const app = await store.appInOrg(appId, orgId);
        return app && appRecord(app);
      },
      connectionFor(app) {
        try {
          return driver.connectionFor(app.bucketName);
        } catch (err) {
          throw storeFailure(err, 'no connection details to give');
        }
      },
      onAppDeleted: (listener) => storage.onAppDeleted(listener),
    };

    return {
      service,
      notices,
      routes: [appRoutes(api, deps), fileRoutes(api, deps, auth)],
      async ready() {
        if (driver.problem) return false;
        await driver.ping();
        return true;
      },
      async close() {
        await Promise.all([storage.settle(), reconciler.settle()]);
        driver.close();
        // Records following the last object changes the endpoint reported.
        await quotas.settle();
      },
    };
  },
});
