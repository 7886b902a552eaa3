import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadKeys } from '../core/keys.ts';
import { AccessTokens } from '../plugins/identity/access-tokens.ts';
import { benchCookie, createBenchUser, ensureBinary, fmt, median, type RequestCase, requestTable, startServer } from './lib.ts';

export async function run(options: { rounds?: number; seconds?: number; logins?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const logins = options.logins ?? 15;
  const bin = ensureBinary();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-auth-'));
  const created = createBenchUser([bin, []], dataDir);
  // Rate limiting off: this measures authentication (bench/rate-limit.ts measures the limiter).
  const server = await startServer({
    name: 'wharf',
    argsFor: (port) => [bin, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir]],
    env: { WHARF_PLUGINS__RATE_LIMIT__ENABLED: 'false', WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0' },
  });
  try {
    const loginMs: number[] = [];
    let cookie = '';
    for (let i = 0; i < logins; i++) {
      const t = performance.now();
      cookie = await benchCookie(server.url);
      loginMs.push(performance.now() - t);
    }
    const bearer = await new AccessTokens(loadKeys(dataDir), server.url, 3600).issue({ userId: created.user.id, orgId: created.org.id });
    for (const headers of [{ cookie }, { authorization: `Bearer ${bearer}` }]) {
      const check = await fetch(`${server.url}/api/cli/me`, { headers });
      if (check.status !== 200) throw new Error(`/api/cli/me with ${Object.keys(headers)[0]}: ${check.status}`);
    }
    const cases: RequestCase[] = [
      { name: 'GET /healthz (no credential)', url: '/healthz', headers: {} },
      { name: 'GET /api/cli/me, __session cookie', url: '/api/cli/me', headers: { cookie } },
      { name: 'GET /api/cli/me, OAuth bearer', url: '/api/cli/me', headers: { authorization: `Bearer ${bearer}` } },
    ];
    const lines = [requestTable(server.url, cases, { rounds, seconds, ratioLabel: '/healthz' })];
    lines.push(
      '',
      `sign-in (POST /auth/login, scrypt N=32768 r=8 p=1): median ${fmt(median(loginMs), 0)} ms, max ${fmt(Math.max(...loginMs), 0)} ms over ${logins} sign-ins`,
      '',
      `(${rounds} rounds of ${seconds} s per request, interleaved; wrk -t1 -c50; the single executable)`,
    );
    return lines.join('\n');
  } finally {
    await server.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
