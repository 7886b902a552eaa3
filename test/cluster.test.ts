/**
 * Several `wharf serve` processes as one Wharf (test/helpers/cluster.ts): one PostgreSQL, one
 * Redis, the same keys, a load balancer in front. A session made on one instance works on the
 * others; rate limits count across instances; `kill -9` of one leaves the others answering and
 * ready, and the balancer's clients see nothing of it; the killed one restarts and rejoins. The takeovers of webhook deliveries and uploads are in
 * test/cluster-deliveries.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, type Instance, startCluster } from './helpers/cluster.ts';
import { login } from './helpers/identity.ts';
import { overHttp } from './helpers/served.ts';

/** A request to one instance with a session cookie (its own URL as Origin, as a browser on it would send). */
function call(instance: Instance, cookie: string, method: string, pathname: string, body?: unknown) {
  return overHttp(instance.url).request(method, pathname, { headers: { cookie, origin: instance.url }, body });
}

/** The limit of the rule the rate-limit test counts against. */
const LIMIT = 10;

describe('several instances on one PostgreSQL and one Redis', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster({
      instances: 3,
      toml: `[plugins.rate_limit.rules.cluster_probe]\nprefixes = ["/api/orgs/invitations"]\nlimit = ${LIMIT}\nanonymous = ${LIMIT}\n`,
    });
  }, 180_000);
  afterAll(async () => {
    await cluster?.close();
  }, 60_000);

  it('started together on an empty database: the migrations ran once, every instance is ready', async () => {
    for (const i of cluster.instances) {
      const res = await fetch(`${i.url}/readyz`);
      expect(res.status, i.output()).toBe(200);
      expect(((await res.json()) as { checks: Record<string, boolean> }).checks.database).toBe(true);
    }
    const status = await cluster.command(['migrate', 'status', '--json']);
    expect(status.status, status.stderr).toBe(0);
    const rows = JSON.parse(status.stdout) as { appliedAt: string | null }[];
    expect(rows.length).toBeGreaterThan(0);
    // One run applied them all (one timestamp), none pending.
    expect(new Set(rows.map((r) => r.appliedAt)).size).toBe(1);
    expect(rows.every((r) => r.appliedAt !== null)).toBe(true);
  });

  it('a session made on one instance is valid on the others; what one writes the others read; a logout ends it everywhere', async () => {
    const [a, b, c] = cluster.instances as [Instance, Instance, Instance];
    const user = await cluster.createUser('Spread');
    const cookie = await login(overHttp(a.url), user.email, user.password);
    const onB = await call(b, cookie, 'GET', '/auth/session');
    expect(onB.status, onB.text).toBe(200);
    expect(onB.body.user.email).toBe(user.email);
    const created = await call(b, cookie, 'POST', '/api/orgs', { name: 'Made on B' });
    expect(created.status, created.text).toBe(201);
    const listed = await call(c, cookie, 'GET', '/api/orgs');
    expect(listed.body.orgs.map((o: { name: string }) => o.name).sort()).toEqual(['Made on B', 'Spread']);
    expect((await call(c, cookie, 'POST', '/auth/logout')).status).toBe(200);
    for (const i of [a, b, c]) expect((await call(i, cookie, 'GET', '/auth/session')).status, `instance ${i.index}`).toBe(401);
  });

  it('rate limits are shared: requests spread over the instances get the 429 at the same count as on one', async () => {
    const countUntil429 = async (targets: Instance[], cookie: string) => {
      const remaining: number[] = [];
      for (let n = 0; n < LIMIT * 3; n++) {
        const res = await call(targets[n % targets.length]!, cookie, 'GET', '/api/orgs/invitations');
        if (res.status === 429) {
          expect(res.body).toEqual({ message: expect.any(String), retry_after: expect.any(Number) });
          expect(res.headers.get('retry-after')).toBe(String(res.body.retry_after));
          return { allowed: n, remaining };
        }
        expect(res.status, res.text).toBe(200);
        remaining.push(Number(res.headers.get('x-ratelimit-remaining')));
      }
      throw new Error('no 429');
    };
    const alone = await cluster.createUser('Alone');
    const spread = await cluster.createUser('Spread out');
    const [a] = cluster.instances as [Instance];
    const one = await countUntil429([a], await login(overHttp(a.url), alone.email, alone.password));
    const all = await countUntil429(cluster.instances, await login(overHttp(a.url), spread.email, spread.password));
    expect(one.allowed).toBe(LIMIT);
    expect(all.allowed).toBe(one.allowed);
    // One counter: each instance's answer continues the others' count.
    expect(all.remaining).toEqual(Array.from({ length: LIMIT }, (_, i) => LIMIT - 1 - i));
  });

  it('kill -9 of one instance while requests go on: the others keep answering and stay ready (/readyz polled throughout); the killed one restarts and rejoins', async () => {
    const [victim, ...others] = cluster.instances as [Instance, Instance, Instance];
    const user = await cluster.createUser('Survivors');
    const cookie = await login(overHttp(victim.url), user.email, user.password);
    const victimUrl = victim.url;
    let going = true;
    let answered = 0;
    const failures: string[] = [];
    const load = (async () => {
      for (let n = 0; going; n++) {
        const target = others[n % others.length]!;
        // A signed-in request, and every fourth time the readiness probe a load balancer polls.
        const pathname = n % 4 === 3 ? '/readyz' : '/auth/session';
        try {
          const res = await call(target, cookie, 'GET', pathname);
          if (res.status === 200) answered++;
          else failures.push(`instance ${target.index} ${pathname}: ${res.status} ${res.text}`);
        } catch (err) {
          failures.push(`instance ${target.index} ${pathname}: ${(err as Error).message}`);
        }
      }
    })();
    while (answered < 5) await new Promise((r) => setTimeout(r, 10));
    await victim.kill();
    const atKill = answered;
    // Written while it is down, on another instance.
    expect((await call(others[0], cookie, 'POST', '/api/orgs', { name: 'While down' })).status).toBe(201);
    while (answered < atKill + 20) await new Promise((r) => setTimeout(r, 10));
    for (const i of others) expect((await fetch(`${i.url}/readyz`)).status, i.output()).toBe(200);
    await expect(fetch(`${victimUrl}/healthz`)).rejects.toThrow();
    going = false;
    await load;
    expect(failures).toEqual([]);

    await victim.restart();
    expect((await fetch(`${victim.url}/readyz`)).status, victim.output()).toBe(200);
    // The session made on it before the kill, and what was written while it was down.
    const orgs = await call(victim, cookie, 'GET', '/api/orgs');
    expect(orgs.status, orgs.text).toBe(200);
    expect(orgs.body.orgs.map((o: { name: string }) => o.name).sort()).toEqual(['Survivors', 'While down']);
  }, 120_000);

  it('through the load balancer: requests spread evenly; an instance killed behind its back costs no request', async () => {
    const user = await cluster.createUser('Balanced');
    const lb = overHttp(cluster.url);
    const cookie = await login(lb, user.email, user.password);
    const headers = { cookie, origin: cluster.url };
    const before = cluster.balanced().served;
    for (let n = 0; n < 30; n++) expect((await lb.request('GET', '/auth/session', { headers })).status).toBe(200);
    const after = cluster.balanced().served;
    expect(cluster.instances.map((i) => (after[i.index] ?? 0) - (before[i.index] ?? 0))).toEqual([10, 10, 10]);

    // SIGKILL straight to the process: the balancer still lists it, meets a refused connection and tries the next.
    const victim = cluster.instances[1]!;
    const victimUrl = victim.url;
    process.kill(victim.pid, 'SIGKILL');
    await expect
      .poll(() =>
        fetch(`${victimUrl}/healthz`).then(
          () => 'up',
          () => 'down',
        ),
      )
      .toBe('down');
    const retried = cluster.balanced().retried;
    for (let n = 0; n < 12; n++) expect((await lb.request('GET', '/auth/session', { headers })).status).toBe(200);
    expect((await lb.request('POST', '/api/orgs', { headers, body: { name: 'Through the balancer' } })).status).toBe(201);
    expect(cluster.balanced().retried).toBeGreaterThan(retried);
    await victim.kill(); // the harness's record of it
    await victim.restart();
    const orgs = await call(victim, cookie, 'GET', '/api/orgs');
    expect(orgs.body.orgs.map((o: { name: string }) => o.name).sort()).toEqual(['Balanced', 'Through the balancer']);
  }, 120_000);
});
