/**
 * Organization invitations: a member is invited, never added. Inviting answers the same whether
 * or not the email has an account; the invitee accepts or declines; invitations expire.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseEnv } from '../../helpers/postgres.ts';
import { startApp, type TestApp } from '../../helpers/app.ts';
import { wharfAsync } from '../../helpers/cli.ts';
import { identityOf, login, signIn, type SignedIn } from '../../helpers/identity.ts';

let app: TestApp;
let owner: SignedIn;
let admin: SignedIn;
let member: SignedIn;

beforeAll(async () => {
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n');
  owner = await signIn(app, { orgName: 'Invite Co' });
  admin = await signIn(app, { orgId: owner.orgId, role: 'admin' });
  member = await signIn(app, { orgId: owner.orgId, role: 'member' });
});
afterAll(() => app?.close());

let n = 0;
const freshEmail = () => `invitee${++n}-${Date.now()}@example.test`;
const invitationsOf = (org: string) => `/api/orgs/${org}/invitations`;
const DAY = 86_400_000;

/** The invitation body every 202 has, registered email or not. */
const INVITATION = {
  id: expect.stringMatching(/^[0-9a-f-]{36}$/),
  email: expect.any(String),
  role: expect.stringMatching(/^(owner|admin|member)$/),
  invitedAt: expect.any(String),
  expiresAt: expect.any(String),
};

async function invite(by: SignedIn, email: string, role?: string, path = invitationsOf(by.orgId)) {
  return app.request('POST', path, { body: role ? { email, role } : { email }, headers: by.headers });
}

/** The invitee's pending invitations. */
async function pending(user: SignedIn) {
  const res = await app.request('GET', '/api/orgs/invitations', { headers: user.headers });
  expect(res.status).toBe(200);
  return res.body.invitations as {
    id: string;
    org: { id: string; slug: string; name: string };
    role: string;
    invitedBy: unknown;
    invitedAt: string;
    expiresAt: string;
  }[];
}

describe('inviting answers the same whether or not the email has an account', () => {
  it.each([['/invitations'], ['/members (the old path, an alias)']])('POST %s: 202 with the same body shape, and nobody becomes a member', async (which) => {
    const registered = await signIn(app);
    const path = which.startsWith('/members') ? `/api/orgs/${owner.orgId}/members` : invitationsOf(owner.orgId);
    const known = await invite(owner, registered.email, 'admin', path);
    const unknown = await invite(owner, freshEmail(), 'admin', path);
    expect(known.status).toBe(202);
    expect(unknown.status).toBe(202);
    expect(known.body).toStrictEqual({ invitation: { ...INVITATION, email: registered.email, role: 'admin' } });
    expect(unknown.body).toStrictEqual({ invitation: { ...INVITATION, email: unknown.body.invitation.email, role: 'admin' } });
    expect(Object.keys(known.body.invitation)).toEqual(Object.keys(unknown.body.invitation));
    expect(JSON.stringify(known.body)).not.toContain(registered.userId);
    expect([...known.headers.keys()].sort()).toEqual([...unknown.headers.keys()].sort());
    // The old behaviour, immediate membership, is gone.
    const members = await app.request('GET', `/api/orgs/${owner.orgId}/members`, { headers: owner.headers });
    expect(members.body.members.map((m: { userId: string }) => m.userId)).not.toContain(registered.userId);
    expect((await app.request('GET', '/api/orgs', { headers: registered.headers })).body.orgs.map((o: { id: string }) => o.id)).not.toContain(owner.orgId);
  });

  it('takes similar time for a registered and an unregistered email (no enumeration by timing)', async () => {
    const identity = identityOf(app);
    const warmup = 5;
    const rounds = 31;
    const registered: string[] = [];
    for (let i = 0; i < warmup + rounds; i++) registered.push((await identity.createUser({ email: freshEmail(), password: 'long enough password' })).email!);
    const time = async (email: string) => {
      const t = performance.now();
      const res = await invite(owner, email);
      expect(res.status).toBe(202);
      return performance.now() - t;
    };
    // Pairs measured back to back, each kind going first in turn, so a burst of load on the
    // machine (other test files run at the same time) falls on both halves of a pair; the median
    // of the pairs' ratios then ignores the pairs a burst split.
    const ratios: number[] = [];
    for (let i = 0; i < warmup + rounds; i++) {
      let known: number;
      let unknown: number;
      if (i % 2) {
        unknown = await time(freshEmail());
        known = await time(registered[i]!);
      } else {
        known = await time(registered[i]!);
        unknown = await time(freshEmail());
      }
      if (i >= warmup) ratios.push(unknown / known);
    }
    const ratio = ratios.sort((a, b) => a - b)[Math.floor(ratios.length / 2)]!;
    // Measured 1.00 to 1.05 alone (requests take about 2 ms) and 0.87 to 1.31 with three busy
    // processes on two cores. 3 ms of extra work for registered emails only (checked by adding
    // it) gives 0.37 to 0.50 alone, failing; under that load it can pass: this catches real work
    // done for one kind (a password hash, a mail), not a few microseconds of SQL.
    expect(ratio).toBeGreaterThan(0.6);
    expect(ratio).toBeLessThan(1 / 0.6);
  });

  it('the inviter sees pending invitations with no sign of whether the address has an account', async () => {
    const registered = await signIn(app);
    const ghost = freshEmail();
    await invite(owner, registered.email);
    await invite(owner, ghost);
    const list = await app.request('GET', invitationsOf(owner.orgId), { headers: admin.headers });
    expect(list.status).toBe(200);
    const mine = list.body.invitations.filter((i: { email: string }) => [registered.email, ghost].includes(i.email));
    expect(mine).toHaveLength(2);
    for (const i of mine) expect(i).toStrictEqual({ ...INVITATION, email: i.email, role: 'member', invitedBy: owner.userId });
    expect(JSON.stringify(list.body)).not.toContain(registered.userId);
  });
});

describe('the invitee', () => {
  it('sees the invitation (email matched whatever its case) and accepting makes the membership with the invited role', async () => {
    const invitee = await signIn(app);
    const sent = await invite(admin, invitee.email.toUpperCase(), 'admin');
    expect(sent.status).toBe(202);
    const [seen, ...rest] = await pending(invitee);
    expect(rest).toEqual([]);
    expect(seen).toStrictEqual({
      id: sent.body.invitation.id,
      org: { id: owner.orgId, slug: expect.any(String), name: 'Invite Co' },
      role: 'admin',
      invitedBy: { name: expect.any(String), email: admin.email },
      invitedAt: sent.body.invitation.invitedAt,
      expiresAt: sent.body.invitation.expiresAt,
    });
    // Nobody else sees it.
    expect((await pending(member)).map((i) => i.id)).not.toContain(seen!.id);

    const accepted = await app.request('POST', `/api/orgs/invitations/${seen!.id}/accept`, { headers: invitee.headers });
    expect(accepted.status).toBe(200);
    expect(accepted.body).toStrictEqual({ org: { id: owner.orgId, slug: seen!.org.slug, name: 'Invite Co', role: 'admin' } });
    const orgs = await app.request('GET', '/api/orgs', { headers: invitee.headers });
    expect(orgs.body.orgs).toContainEqual({ id: owner.orgId, slug: seen!.org.slug, name: 'Invite Co', role: 'admin' });
    const members = await app.request('GET', `/api/orgs/${owner.orgId}/members`, { headers: invitee.headers });
    expect(members.body.members).toContainEqual(expect.objectContaining({ userId: invitee.userId, role: 'admin' }));
    // Spent: gone from both lists, and a second accept is 404.
    expect(await pending(invitee)).toEqual([]);
    const list = await app.request('GET', invitationsOf(owner.orgId), { headers: owner.headers });
    expect(list.body.invitations.map((i: { id: string }) => i.id)).not.toContain(seen!.id);
    const again = await app.request('POST', `/api/orgs/invitations/${seen!.id}/accept`, { headers: invitee.headers });
    expect(again.status).toBe(404);
  });

  it('accepted by someone with no organization yet: the organization becomes the active one of the session', async () => {
    const email = `loner-${Date.now()}@example.test`;
    await identityOf(app).createUser({ email, password: 'loner password 1' });
    const cookie = await login(app, email, 'loner password 1');
    const headers = { cookie, origin: app.url };
    expect((await app.request('GET', '/auth/session', { headers })).body.activeOrgId).toBeNull();
    const sent = await invite(owner, email);
    expect((await app.request('POST', `/api/orgs/invitations/${sent.body.invitation.id}/accept`, { headers })).status).toBe(200);
    expect((await app.request('GET', '/auth/session', { headers })).body.activeOrgId).toBe(owner.orgId);
    const again = await app.request('POST', `/api/orgs/invitations/${sent.body.invitation.id}/accept`, { headers });
    expect(again.body.error).toMatch(/already accepted/);
  });

  it('declines: the invitation is gone and no membership is made', async () => {
    const invitee = await signIn(app);
    const sent = await invite(owner, invitee.email);
    const declined = await app.request('POST', `/api/orgs/invitations/${sent.body.invitation.id}/decline`, { headers: invitee.headers });
    expect(declined.status).toBe(200);
    expect(declined.body).toStrictEqual({ success: true });
    expect(await pending(invitee)).toEqual([]);
    expect((await app.request('GET', '/api/orgs', { headers: invitee.headers })).body.orgs.map((o: { id: string }) => o.id)).not.toContain(owner.orgId);
    expect((await app.request('POST', `/api/orgs/invitations/${sent.body.invitation.id}/accept`, { headers: invitee.headers })).status).toBe(404);
  });

  it('of another email cannot see, accept or decline it: 404 like an unknown id', async () => {
    const invitee = await signIn(app);
    const thief = await signIn(app);
    const id = (await invite(owner, invitee.email)).body.invitation.id;
    const unknown = await app.request('POST', '/api/orgs/invitations/00000000-0000-4000-8000-000000000000/accept', { headers: thief.headers });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toStrictEqual({ error: expect.any(String) });
    for (const action of ['accept', 'decline']) {
      const res = await app.request('POST', `/api/orgs/invitations/${id}/${action}`, { headers: thief.headers });
      expect(res.status, action).toBe(404);
      expect(res.body).toStrictEqual(unknown.body);
    }
    // Not even the inviter accepts on the invitee's behalf.
    expect((await app.request('POST', `/api/orgs/invitations/${id}/accept`, { headers: owner.headers })).status).toBe(404);
    expect((await app.request('GET', '/api/orgs', { headers: thief.headers })).body.orgs.map((o: { id: string }) => o.id)).not.toContain(owner.orgId);
    expect((await pending(invitee)).map((i) => i.id)).toEqual([id]);
    expect((await app.request('POST', '/api/orgs/invitations/not-a-uuid/accept', { headers: invitee.headers })).status).toBe(404);
  });

  it('who registers later sees the invitation then (wharf admin create-user while the server runs)', async () => {
    const email = freshEmail();
    const id = (await invite(owner, email, 'member')).body.invitation.id;
    const made = await wharfAsync(['admin', 'create-user', '--email', email.toUpperCase(), '--password', 'later password', '--data-dir', app.dataDir], {
      // On the server's database under the project "on postgres".
      env: { WHARF_PLUGINS__IDENTITY__SCRYPT_COST: '1024', ...(await databaseEnv(app.dataDir)) },
    });
    expect(made.stderr).toBe('');
    expect(made.status).toBe(0);
    const cookie = await login(app, email, 'later password');
    const headers = { cookie, origin: app.url };
    const list = await app.request('GET', '/api/orgs/invitations', { headers });
    expect(list.body.invitations.map((i: { id: string }) => i.id)).toEqual([id]);
    expect((await app.request('POST', `/api/orgs/invitations/${id}/accept`, { headers })).status).toBe(200);
    expect((await app.request('GET', '/api/orgs', { headers })).body.orgs).toEqual([expect.objectContaining({ id: owner.orgId, role: 'member' })]);
  });

  it('who became a member meanwhile keeps the role it has when accepting, and the invitation is spent', async () => {
    const invitee = await signIn(app);
    const id = (await invite(owner, invitee.email, 'owner')).body.invitation.id;
    await identityOf(app).addMember(owner.orgId, invitee.userId, 'member');
    const accepted = await app.request('POST', `/api/orgs/invitations/${id}/accept`, { headers: invitee.headers });
    expect(accepted.status).toBe(200);
    expect(accepted.body.org).toMatchObject({ id: owner.orgId, role: 'member' });
    expect(await pending(invitee)).toEqual([]);
  });

  it('needs a signed-in user', async () => {
    for (const [method, path] of [
      ['GET', '/api/orgs/invitations'],
      ['POST', '/api/orgs/invitations/00000000-0000-4000-8000-000000000000/accept'],
      ['POST', '/api/orgs/invitations/00000000-0000-4000-8000-000000000000/decline'],
      ['GET', invitationsOf(owner.orgId)],
      ['POST', invitationsOf(owner.orgId)],
      ['DELETE', `${invitationsOf(owner.orgId)}/00000000-0000-4000-8000-000000000000`],
    ] as const) {
      const res = await app.request(method, path, { body: method === 'POST' ? { email: 'a@example.test' } : undefined });
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.body).toStrictEqual({ error: 'Authentication required' });
    }
  });
});

describe('expiry and renewal', () => {
  const age = (id: string, expiresAt: string) => app.running.data.run('UPDATE identity_invitations SET expires_at = ? WHERE id = ?', [expiresAt, id]);

  it('expires after invitation_ttl_days (7 by default); an expired invitation is not listed and cannot be accepted (404)', async () => {
    const invitee = await signIn(app);
    const before = Date.now();
    const sent = (await invite(owner, invitee.email)).body.invitation;
    const expires = Date.parse(sent.expiresAt);
    expect(expires).toBeGreaterThanOrEqual(before + 7 * DAY - 1000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 7 * DAY + 1000);
    await age(sent.id, new Date(Date.now() - 1000).toISOString());
    expect(await pending(invitee)).toEqual([]);
    const list = await app.request('GET', invitationsOf(owner.orgId), { headers: owner.headers });
    expect(list.body.invitations.map((i: { id: string }) => i.id)).not.toContain(sent.id);
    const late = await app.request('POST', `/api/orgs/invitations/${sent.id}/accept`, { headers: invitee.headers });
    expect(late.status).toBe(404);
    expect(late.body).toStrictEqual({ error: 'No pending invitation with that id (it may have expired, been revoked, declined or already accepted)' });
    expect((await app.request('GET', '/api/orgs', { headers: invitee.headers })).body.orgs.map((o: { id: string }) => o.id)).not.toContain(owner.orgId);
  });

  it('re-inviting the same email renews and updates the one invitation rather than adding another', async () => {
    const email = freshEmail();
    const first = (await invite(owner, email, 'member')).body.invitation;
    await age(first.id, new Date(Date.now() + 60_000).toISOString());
    const second = await invite(owner, `  ${email.toUpperCase()} `, 'admin');
    expect(second.status).toBe(202);
    expect(second.body.invitation).toMatchObject({ id: first.id, role: 'admin' });
    expect(Date.parse(second.body.invitation.expiresAt)).toBeGreaterThan(Date.now() + 6 * DAY);
    const list = await app.request('GET', invitationsOf(owner.orgId), { headers: owner.headers });
    const same = list.body.invitations.filter((i: { email: string }) => i.email.toLowerCase() === email);
    expect(same).toHaveLength(1);
    expect(same[0]).toMatchObject({ id: first.id, role: 'admin' });
    // An expired one is renewed too.
    await age(first.id, new Date(Date.now() - 1000).toISOString());
    const third = await invite(owner, email);
    expect(third.body.invitation.id).toBe(first.id);
    expect(Date.parse(third.body.invitation.expiresAt)).toBeGreaterThan(Date.now() + 6 * DAY);
  });

  it('takes its lifetime from [plugins.identity] invitation_ttl_days', async () => {
    const short = await startApp('[plugins.identity]\nscrypt_cost = 1024\ninvitation_ttl_days = 2\n');
    try {
      const boss = await signIn(short);
      const res = await short.request('POST', invitationsOf(boss.orgId), { body: { email: 'two-days@example.test' }, headers: boss.headers });
      expect(res.status).toBe(202);
      expect(Math.abs(Date.parse(res.body.invitation.expiresAt) - Date.now() - 2 * DAY)).toBeLessThan(5000);
    } finally {
      await short.close();
    }
  });
});

describe('managing invitations', () => {
  it('revoke: the invitation disappears for the invitee and cannot be accepted', async () => {
    const invitee = await signIn(app);
    const id = (await invite(owner, invitee.email)).body.invitation.id;
    const revoked = await app.request('DELETE', `${invitationsOf(owner.orgId)}/${id}`, { headers: admin.headers });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toStrictEqual({ success: true });
    expect(await pending(invitee)).toEqual([]);
    expect((await app.request('POST', `/api/orgs/invitations/${id}/accept`, { headers: invitee.headers })).status).toBe(404);
    expect((await app.request('DELETE', `${invitationsOf(owner.orgId)}/${id}`, { headers: admin.headers })).status).toBe(404);
  });

  it('role rules: owners and admins invite, only owners invite, re-invite or revoke owners', async () => {
    const email = freshEmail();
    const denied = await invite(member, email);
    expect(denied.status).toBe(403);
    expect(denied.body).toStrictEqual({ error: 'Only owners and admins manage members' });
    expect((await app.request('GET', invitationsOf(owner.orgId), { headers: member.headers })).status).toBe(403);
    const adminOwner = await invite(admin, email, 'owner');
    expect(adminOwner.status).toBe(403);
    expect(adminOwner.body).toStrictEqual({ error: 'Only owners invite owners' });
    expect((await invite(admin, email, 'admin')).status).toBe(202);

    const future = await signIn(app);
    const ownerInvite = (await invite(owner, future.email, 'owner')).body.invitation;
    expect(ownerInvite.role).toBe('owner');
    expect((await invite(admin, future.email, 'member')).status).toBe(403);
    expect((await app.request('DELETE', `${invitationsOf(owner.orgId)}/${ownerInvite.id}`, { headers: admin.headers })).status).toBe(403);
    expect((await app.request('DELETE', `${invitationsOf(owner.orgId)}/${ownerInvite.id}`, { headers: member.headers })).status).toBe(403);
    const accepted = await app.request('POST', `/api/orgs/invitations/${ownerInvite.id}/accept`, { headers: future.headers });
    expect(accepted.body.org.role).toBe('owner');
  });

  it('refuses bad input with 400 and an existing member with 409', async () => {
    const path = invitationsOf(owner.orgId);
    for (const [body, error] of [
      [{}, 'email is required'],
      [{ email: 5 }, 'email must be a string'],
      [{ email: 'not-an-address' }, 'email is not a valid address'],
      [{ email: `${'x'.repeat(320)}@example.test` }, expect.stringMatching(/^email/)],
      [{ email: 'king@example.test', role: 'king' }, expect.stringMatching(/^role/)],
    ] as const) {
      const res = await app.request('POST', path, { body, headers: owner.headers });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toStrictEqual({ error });
    }
    const already = await invite(owner, member.email.toUpperCase());
    expect(already.status).toBe(409);
    expect(already.body).toStrictEqual({ error: 'Already a member' });
  });

  it('scopes every invitation to its organization: another organization\u2019s answers 404', async () => {
    const other = await signIn(app, { orgName: 'Other Org' });
    const invitee = await signIn(app);
    const id = (await invite(owner, invitee.email)).body.invitation.id;
    // The other organization's owner, through its own organization, cannot touch it.
    const revoke = await app.request('DELETE', `${invitationsOf(other.orgId)}/${id}`, { headers: other.headers });
    expect(revoke.status).toBe(404);
    const ownList = await app.request('GET', invitationsOf(other.orgId), { headers: other.headers });
    expect(ownList.body).toStrictEqual({ invitations: [] });
    // Nor through the first organization, which it is not in: 404 like a missing one.
    for (const [method, path] of [
      ['GET', invitationsOf(owner.orgId)],
      ['POST', invitationsOf(owner.orgId)],
      ['DELETE', `${invitationsOf(owner.orgId)}/${id}`],
    ] as const) {
      const res = await app.request(method, path, { body: method === 'POST' ? { email: freshEmail() } : undefined, headers: other.headers });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body).toStrictEqual({ error: 'Organization not found' });
    }
    expect((await pending(invitee)).map((i) => i.id)).toEqual([id]);
  });
});
