/**
 * The messaging client commands as a user runs them, after a real `wharf login` (device flow):
 * `wharf pat ...`, `wharf sessions ...` and `wharf sandbox receive`, in text and --json, and
 * their one-line errors.
 */
import { Boom } from '@hapi/boom';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { tempDir, type TestApp } from '../helpers/app.ts';
import { wharfAsync } from '../helpers/cli.ts';
import { cliLogin, signIn, type SignedIn } from '../helpers/identity.ts';
import { call, eventsOf, lastEventId, startMessagingApp } from '../plugins/sessions/helpers.ts';
import { FakeWhatsApp, mockedBaileys } from '../helpers/fake-whatsapp.ts';

// WhatsApp itself cannot be reached from here: the server's Baileys sockets are the fake network's.
const fake = vi.hoisted(() => ({}) as { network?: FakeWhatsApp });
vi.mock('baileys', async (importOriginal) => mockedBaileys(await importOriginal(), fake.network!, Boom));
fake.network = new FakeWhatsApp();

let app: TestApp;
let user: SignedIn;
let env: NodeJS.ProcessEnv;

const wharf = (args: string[]) => wharfAsync(args, { env });
const json = async (args: string[]) => {
  const r = await wharf([...args, '--json']);
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
};

beforeAll(async () => {
  app = await startMessagingApp();
  user = await signIn(app, { orgName: 'Messaging CLI' });
  const home = tempDir();
  expect((await cliLogin(app, user, home)).code).toBe(0);
  env = { XDG_CONFIG_HOME: home };
});
afterAll(() => app?.close());

describe('wharf pat', () => {
  it('creates (shown once), lists and revokes personal access tokens', async () => {
    const created = await wharf(['pat', 'create', '--name', 'ci deploys']);
    expect(created.status, created.stderr).toBe(0);
    const match = /^Created personal access token (\d+) "ci deploys"\. It is shown only this once:\n(wpat_[A-Za-z0-9_-]{43})\n$/.exec(created.stdout);
    expect(match, created.stdout).not.toBeNull();
    const [, id, token] = match!;
    expect((await call(app, token, 'GET', '/api/whatsapp-sessions')).status).toBe(200);

    const expiring = await json(['pat', 'create', '--name', 'temp', '--expires-at', '2999-01-01T00:00:00Z']);
    expect(expiring).toMatchObject({ id: expect.any(Number), name: 'temp', token: expect.stringMatching(/^wpat_/), expires_at: '2999-01-01T00:00:00.000Z' });

    const list = await wharf(['pat', 'list']);
    expect(list.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+TOKEN\s+CREATED\s+LAST USED\s+EXPIRES$/);
    expect(list.stdout).toContain('ci deploys');
    expect(list.stdout).toContain(`…${token!.slice(-4)}`);
    expect((await json(['pat', 'list'])).map((t: { name: string }) => t.name)).toEqual(['ci deploys', 'temp']);

    const revoked = await wharf(['pat', 'revoke', id!]);
    expect(revoked).toMatchObject({ status: 0, stdout: `Revoked personal access token ${id}\n` });
    expect((await call(app, token, 'GET', '/api/whatsapp-sessions')).status).toBe(401);
    expect(await wharf(['pat', 'revoke', id!])).toMatchObject({ status: 1, stdout: '', stderr: 'wharf: Token not found\n' });
    expect(await wharf(['pat', 'create', '--name', 'x', '--expires-at', '2000-01-01T00:00:00Z'])).toMatchObject({
      status: 1,
      stderr: 'wharf: The given data was invalid. (expires_at must be in the future)\n',
    });
  }, 90_000);
});

describe('wharf sessions', () => {
  it('creates, lists, shows, connects, disconnects, regenerates the key of and deletes sessions', async () => {
    const sandbox = await wharf(['sessions', 'create', '--sandbox', '--name', 'CLI sandbox']);
    expect(sandbox.status, sandbox.stderr).toBe(0);
    const m = /^Created sandbox session (\d+) "CLI sandbox" \((\+1555\d+), connected\)\napi_key: (wsk_\S+)\n$/.exec(sandbox.stdout);
    expect(m, sandbox.stdout).not.toBeNull();
    const [, id, , key] = m!;
    expect((await call(app, key, 'GET', '/api/status')).body).toStrictEqual({ status: 'connected' });

    const wa = await json([
      'sessions',
      'create',
      '--name',
      'CLI WhatsApp',
      '--phone',
      '+14155550142',
      '--log-messages',
      '--webhook-url',
      'https://hooks.example.com/x',
    ]);
    expect(wa).toMatchObject({
      type: 'whatsapp',
      status: 'disconnected',
      phone_number: '+14155550142',
      log_messages: true,
      webhook_url: 'https://hooks.example.com/x',
      webhook_enabled: true,
      webhook_events: [],
      api_key: expect.stringMatching(/^wsk_/),
    });

    // The API returns every key whole (the spec says so); the CLI shows the end of it, unless --show-secret.
    const hint = `…${key!.slice(-4)}`;
    const list = await wharf(['sessions', 'list']);
    expect(list.stdout).toMatch(/^ID\s+NAME\s+PHONE\s+TYPE\s+STATUS\s+API KEY\n/);
    expect(list.stdout).toMatch(new RegExp(`\\n${id}\\s+CLI sandbox\\s+\\+1555\\d+\\s+sandbox\\s+connected\\s+${hint}\\n`));
    expect(list.stdout).not.toContain(key);
    expect(list.stdout).not.toContain(wa.api_key);
    const listed = await json(['sessions', 'list']);
    expect(listed.map((s: { id: number; api_key_hint: string }) => [s.id, s.api_key_hint])).toEqual([
      [Number(id), hint],
      [wa.id, `…${wa.api_key.slice(-4)}`],
    ]);
    expect(JSON.stringify(listed)).not.toContain('wsk_');
    expect((await json(['sessions', 'list', '--show-secret']))[0]).toMatchObject({ id: Number(id), api_key: key });

    const shown = await wharf(['sessions', 'get', id!]);
    expect(shown.stdout).toContain(`\napi_key: ${hint}\n`);
    expect(shown.stdout).not.toContain(key);
    expect(shown.stdout).toContain('\nwebhook_events: - (none)\n');
    expect((await wharf(['sessions', 'show', id!])).stdout).toBe(shown.stdout);
    const plain = await json(['sessions', 'get', id!]);
    expect(plain).toMatchObject({ id: Number(id), api_key_hint: hint });
    expect(plain).not.toHaveProperty('api_key');
    expect((await wharf(['sessions', 'get', id!, '--show-secret'])).stdout).toContain(`\napi_key: ${key}\n`);
    const revealed = await json(['sessions', 'get', id!, '--show-secret']);
    expect(revealed).toMatchObject({ id: Number(id), api_key: key, webhook_secret: expect.any(String) });
    expect(revealed).not.toHaveProperty('api_key_hint');
    const updated = await wharf(['sessions', 'update', id!, '--name', 'CLI sandbox', '--json']);
    expect(JSON.parse(updated.stdout)).toMatchObject({ id: Number(id), api_key_hint: hint });
    expect(updated.stdout).not.toContain(key);

    expect(await wharf(['sessions', 'connect', id!])).toMatchObject({
      status: 0,
      stdout: `Session ${id}: connected (Sandbox sessions are always connected)\n`,
    });
    expect(await json(['sessions', 'disconnect', id!])).toMatchObject({ id: Number(id), status: 'connected' });
    // A whatsapp session starts pairing: the command shows the QR code to scan.
    const pairing = await wharf(['sessions', 'connect', String(wa.id)]);
    expect(pairing.status, pairing.stderr).toBe(0);
    expect(pairing.stdout).toMatch(new RegExp(`^Session ${wa.id}: need_scan \\(Scan the QR code with the phone: [^)]+\\)\\nQR code: 2@\\S+\\n$`));

    // regenerate-key shows the new key whole, once.
    const regenerated = await wharf(['sessions', 'regenerate-key', id!]);
    const fresh = /\n(wsk_\S+)\n$/.exec(regenerated.stdout)![1]!;
    expect(fresh).not.toBe(key);
    expect((await call(app, key, 'GET', '/api/status')).status).toBe(401);
    expect((await call(app, fresh, 'GET', '/api/status')).status).toBe(200);

    expect(await wharf(['sessions', 'delete', String(wa.id)])).toMatchObject({ status: 0, stdout: `Deleted session ${wa.id}\n` });
    expect(await wharf(['sessions', 'get', String(wa.id)])).toMatchObject({ status: 1, stdout: '', stderr: 'wharf: Session not found\n' });
    expect(await wharf(['sessions', 'get', 'abc'])).toMatchObject({ status: 1, stderr: 'wharf: session id must be a positive integer: abc\n' });
    expect(await wharf(['sessions', 'create', '--name', 'No phone'])).toMatchObject({
      status: 1,
      stderr: 'wharf: The given data was invalid. (phone_number is required)\n',
    });
  }, 180_000);
});

describe('wharf sandbox receive', () => {
  it("makes a sandbox session receive a message, with the session's key read for the user", async () => {
    const created = await json(['sessions', 'create', '--sandbox', '--name', 'Inbox']);
    const from = await lastEventId(app, created.id);
    const r = await wharf([
      'sandbox',
      'receive',
      '--session',
      String(created.id),
      '--from',
      '+14155550123',
      '--text',
      'hello from the CLI',
      '--push-name',
      'Zed',
    ]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^Session ${created.id} received message 3EB0[0-9A-F]{32} from \\+14155550123 in a personal chat \\(\\d+@lid\\)\\n$`));
    const got = (await eventsOf(app, created.id, from)).find((e) => e.event === 'messages.received')!;
    expect(got.payload.data).toMatchObject({
      message: { conversation: 'hello from the CLI' },
      pushName: 'Zed',
      key: { remoteJidAlt: '14155550123@s.whatsapp.net', fromMe: false },
    });

    const group = await json(['sandbox', 'receive', '--session', String(created.id), '--from', '+14155550123', '--text', 'to the group', '--chat', 'group']);
    expect(group).toMatchObject({ session: created.id, key: { remoteJid: expect.stringMatching(/@g\.us$/), participantAlt: '14155550123@s.whatsapp.net' } });
    expect((await eventsOf(app, created.id)).at(-1)!.event).toBe('messages-group');

    const wa = await json(['sessions', 'create', '--name', 'Real', '--phone', '+14155550143']);
    const notSandbox = await wharf(['sandbox', 'receive', '--session', String(wa.id), '--from', '+14155550123', '--text', 'x']);
    expect(notSandbox.status).toBe(1);
    expect(notSandbox.stderr).toMatch(/^wharf: Sandbox receive works only on sandbox sessions\. \(session \d+ is a whatsapp session; .*\)\n$/);
    expect(await wharf(['sandbox', 'receive', '--session', String(created.id), '--from', 'nobody', '--text', 'x'])).toMatchObject({
      status: 1,
      stderr: 'wharf: The given data was invalid. (from: must be a phone number in E.164 format, for example +14155550123)\n',
    });
    expect(await wharf(['sandbox', 'receive', '--session', '999999', '--from', '+14155550123', '--text', 'x'])).toMatchObject({
      status: 1,
      stderr: 'wharf: Session not found\n',
    });
    const usage = await wharf(['sandbox', 'receive', '--session', String(created.id)]);
    expect(usage.status).toBe(2);
    expect(usage.stderr).toMatch(/^wharf: Missing required arguments: from, text \(see wharf --help\)\n$/);
  }, 90_000);

  it('needs a sign-in', async () => {
    const r = await wharfAsync(['sessions', 'list', '--instance', app.url], { env: { XDG_CONFIG_HOME: tempDir() } });
    expect(r).toMatchObject({ status: 1, stderr: `wharf: not signed in to ${app.url}; run wharf login --instance ${app.url}\n` });
  });
});
