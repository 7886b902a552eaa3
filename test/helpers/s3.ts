// Test helper: a real S3 endpoint for the tests.
//
// - S3_ENDPOINT set: use that server (S3_ACCESS_KEY / S3_SECRET_KEY / S3_REGION, defaults
//   test / testsecret / us-east-1) after checking that it answers.
// - otherwise: `bash test/s3/ceph-rgw.sh up` brings up (or finds) the project's single-node Ceph RGW.
//   The script is idempotent and serialised with flock, so concurrent test workers share one cluster.
//
// - WHARF_TEST_STORE=embedded: the embedded store (the `fs` driver's S3 endpoint) over a temporary
//   objects directory, root key test / testsecret; apps started with startStorageApp then use the
//   `fs` driver on the same directory, so the same contract tests run against it unchanged.
//
// Never skips: if no S3 server can be had, ensureS3() throws with the script's output.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { S3Client } from '@aws-sdk/client-s3';

export type S3Target = {
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  forcePathStyle: true;
  /** Set when the target is the embedded store: the objects directory its endpoint serves. */
  embedded?: { objectsDir: string; dataDir: string };
};

const SCRIPT = fileURLToPath(new URL('../s3/ceph-rgw.sh', import.meta.url));
const UP_TIMEOUT_MS = 10 * 60_000; // a cold CI machine runs apt-get first
const TAIL_LINES = 60;

let pending: Promise<S3Target> | undefined;

/** A reachable S3 server; memoised per process (a failed attempt is not memoised). */
export async function ensureS3(): Promise<S3Target> {
  pending ??= resolveTarget().catch((err: unknown) => {
    pending = undefined;
    throw err;
  });
  return pending;
}

async function resolveTarget(): Promise<S3Target> {
  const env = process.env;
  if (env.WHARF_TEST_STORE === 'embedded') return embeddedTarget();
  const creds = {
    region: env.S3_REGION || 'us-east-1',
    accessKeyId: env.S3_ACCESS_KEY || 'test',
    secretAccessKey: env.S3_SECRET_KEY || 'testsecret',
    forcePathStyle: true as const,
  };
  if (env.S3_ENDPOINT) {
    const endpoint = env.S3_ENDPOINT.replace(/\/+$/, '');
    await assertAnswers(endpoint, 'S3_ENDPOINT');
    return { endpoint, ...creds };
  }
  const out = await runScript(['up'], {
    S3_REGION: creds.region,
    S3_ACCESS_KEY: creds.accessKeyId,
    S3_SECRET_KEY: creds.secretAccessKey,
  });
  const m = /^endpoint=(\S+)$/m.exec(out.stdout);
  if (!m?.[1]) {
    throw new Error(`ensureS3: ${SCRIPT} up succeeded but printed no endpoint=… line\n${tail(out)}`);
  }
  const endpoint = m[1];
  await assertAnswers(endpoint, SCRIPT);
  return { endpoint, ...creds };
}

type Output = { stdout: string; stderr: string };

function runScript(args: string[], extraEnv: Record<string, string>): Promise<Output> {
  return new Promise((resolve, reject) => {
    execFile(
      'bash',
      [SCRIPT, ...args],
      {
        env: { ...process.env, ...extraEnv },
        timeout: UP_TIMEOUT_MS,
        killSignal: 'SIGKILL',
        maxBuffer: 64 * 1024 * 1024,
        encoding: 'utf8',
      },
      (err, stdout, stderr) => {
        const out = { stdout, stderr };
        if (!err) return resolve(out);
        const how = err.killed ? `was killed after ${UP_TIMEOUT_MS / 1000}s` : `failed (exit ${String(err.code ?? err.signal)})`;
        reject(
          new Error(
            `ensureS3: could not start the test S3 server: \`bash ${SCRIPT} ${args.join(' ')}\` ${how}. ` +
              `Set S3_ENDPOINT to use an existing S3 server instead.\n${tail(out)}`,
          ),
        );
      },
    );
  });
}

function tail({ stdout, stderr }: Output): string {
  const lines = `${stdout}${stdout && !stdout.endsWith('\n') ? '\n' : ''}${stderr}`.trimEnd().split('\n');
  return `--- last ${Math.min(lines.length, TAIL_LINES)} lines of output ---\n${lines.slice(-TAIL_LINES).join('\n')}`;
}

/** Any HTTP response (even 403) counts as answering; a connection failure or timeout does not. */
async function assertAnswers(endpoint: string, source: string): Promise<void> {
  try {
    const res = await fetch(`${endpoint}/`, { signal: AbortSignal.timeout(10_000) });
    await res.body?.cancel();
  } catch (err) {
    const cause = err instanceof Error ? `${err.message}${err.cause ? ` (${String(err.cause)})` : ''}` : String(err);
    throw new Error(`ensureS3: S3 endpoint ${endpoint} (from ${source}) does not answer: ${cause}`);
  }
}

/** An S3Client for the target: path-style, checksums only where the API requires them (RGW-friendly). */
export function s3Client(target: S3Target): S3Client {
  return new S3Client({
    endpoint: target.endpoint,
    region: target.region,
    forcePathStyle: target.forcePathStyle,
    credentials: { accessKeyId: target.accessKeyId, secretAccessKey: target.secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** The embedded store as a stand-alone endpoint (one per test process), root key test / testsecret. */
async function embeddedTarget(): Promise<S3Target> {
  const [{ startStandaloneStore }, { createLogger }, { loadKeys }, fs, os, path] = await Promise.all([
    import('../../plugins/storage/drivers/fs/index.ts'),
    import('../../core/logger.ts'),
    import('../../core/keys.ts'),
    import('node:fs'),
    import('node:os'),
    import('node:path'),
  ]);
  const objectsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-objects-'));
  // A data dir whose keys every app server of this process shares (startStorageApp copies them),
  // so this endpoint accepts their service and per-app keys: presigned URLs and validated
  // credentials all point here.
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-embedded-keys-'));
  const keys = loadKeys(dataDir);
  const root = { accessKey: 'test', secretKey: 'testsecret' };
  const store = await startStandaloneStore({ objectsDir, listen: '127.0.0.1:0', region: 'us-east-1', root, keys, log: createLogger('silent') });
  return {
    endpoint: store.url,
    region: 'us-east-1',
    accessKeyId: root.accessKey,
    secretAccessKey: root.secretKey,
    forcePathStyle: true,
    embedded: { objectsDir, dataDir },
  };
}
