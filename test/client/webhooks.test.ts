/**
 * Webhook settings from the command line, as a user runs them after `wharf login`: `sessions
 * create --webhook-url` delivers at once, `sessions update` changes URL, enabled, events and
 * signing, `sessions get --show-secret` shows the secret the receiver checks. Deliveries go to a
 * real HTTP receiver through a real `wharf sandbox receive`.
 */
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir, type TestApp } from '../helpers/app.ts';
import { wharfAsync } from '../helpers/cli.ts';
import { cliLogin, signIn } from '../helpers/identity.ts';
import { eventually, type Received, Receiver, startWebhooksApp } from '../plugins/webhooks/helpers.ts';

let app: TestApp;
let receiver: Receiver;
let env: NodeJS.ProcessEnv;

const wharf = (args: string[]) => wharfAsync(args, { env });
const json = async (args: string[]) => {
  const r = await wharf([...args, '--json']);
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
};
const hexHmac = (secret: string, body: Buffer) => createHmac('sha256', secret).update(body).digest('hex');

let sender = 0;
/** `wharf sandbox receive` on the session, then the delivery of that message at `path`. */
async function receiveAt(id: number, path: string, text: string): Promise<Received> {
  const from = `+1415555${String(2000 + ++sender)}`;
  const r = await wharf(['sandbox', 'receive', '--session', String(id), '--from', from, '--text', text]);
  expect(r.status, r.stderr).toBe(0);
  return eventually(
    () => receiver.requests.find((q) => q.path === path && q.json?.event === 'messages.received' && q.json.data.message.conversation === text),
    10_000,
    `delivery of "${text}"`,
  );
}

async function dispatchCount(id: number): Promise<number> {
  return (await json(['dispatches', 'list', '--session', String(id)])).total;
}

beforeAll(async () => {
  app = await startWebhooksApp();
  receiver = await Receiver.start();
  const user = await signIn(app, { orgName: 'Webhook CLI' });
  const home = tempDir();
  expect((await cliLogin(app, user, home)).code).toBe(0);
  env = { XDG_CONFIG_HOME: home };
});
afterAll(async () => {
  await receiver?.close();
  await app?.close();
});

describe('wharf sessions and webhooks', () => {
  it('create --webhook-url subscribes to every event and enables the webhook, so the first message is delivered', async () => {
    const created = await wharf(['sessions', 'create', '--sandbox', '--name', 'Obvious', '--webhook-url', receiver.url('/obvious')]);
    expect(created.status, created.stderr).toBe(0);
    const m = /^Created sandbox session (\d+) "Obvious" \(\+1555\d+, connected\)\napi_key: wsk_\S+\nwebhook: (\S+) \(enabled, events: \[\] \(all\)\)\n$/.exec(
      created.stdout,
    );
    expect(m, created.stdout).not.toBeNull();
    expect(m![2]).toBe(receiver.url('/obvious'));
    const id = Number(m![1]);

    // The secret stays hidden unless asked for, in text and in JSON.
    const shown = await wharf(['sessions', 'get', String(id)]);
    expect(shown.stdout).toContain('\nwebhook_enabled: true\nwebhook_events: [] (all)\nwebhook_signing: secret\n');
    expect(shown.stdout).not.toContain('webhook_secret');
    const plain = await json(['sessions', 'get', String(id)]);
    expect(plain).toMatchObject({ webhook_url: receiver.url('/obvious'), webhook_enabled: true, webhook_events: [], webhook_signing: 'secret' });
    expect(plain).not.toHaveProperty('webhook_secret');
    const revealed = await wharf(['sessions', 'get', String(id), '--show-secret']);
    const secret = /\nwebhook_secret: (\S+)\n/.exec(revealed.stdout)?.[1];
    expect(secret, revealed.stdout).toBeDefined();
    expect((await json(['sessions', 'get', String(id), '--show-secret'])).webhook_secret).toBe(secret);

    // Every event: the connection at creation, then the message.
    await eventually(() => receiver.requests.find((q) => q.path === '/obvious' && q.json?.event === 'session.status'), 10_000, 'session.status');
    const delivery = await receiveAt(id, '/obvious', 'first message');
    expect(delivery.json.sessionId).toBe(id);
    expect(delivery.headers['x-webhook-signature']).toBe(secret);

    // --events and --no-webhook-enabled at create are honoured as given.
    const chosen = await json([
      'sessions',
      'create',
      '--sandbox',
      '--name',
      'Chosen',
      '--webhook-url',
      receiver.url('/chosen'),
      '--events',
      'messages.received,session.status',
    ]);
    expect(chosen).toMatchObject({ webhook_enabled: true, webhook_events: ['messages.received', 'session.status'] });
    const paused = await json([
      'sessions',
      'create',
      '--sandbox',
      '--name',
      'Paused',
      '--webhook-url',
      receiver.url('/paused'),
      '--no-webhook-enabled',
      '--signing',
      'hmac',
    ]);
    expect(paused).toMatchObject({ webhook_enabled: false, webhook_events: [], webhook_signing: 'hmac' });
    expect((await json(['sessions', 'get', String(paused.id)])).webhook_signing).toBe('hmac');
    const none = await json(['sessions', 'create', '--sandbox', '--name', 'No hook']);
    expect(none).toMatchObject({ webhook_url: null, webhook_enabled: false, webhook_events: null });
  }, 90_000);

  it('update changes the URL, enabled, events and signing, and keeps the other settings', async () => {
    const created = await json(['sessions', 'create', '--sandbox', '--name', 'Tuned', '--webhook-url', receiver.url('/tuned'), '--log-messages']);
    const id = created.id as number;
    const secret = (await json(['sessions', 'get', String(id), '--show-secret'])).webhook_secret as string;

    const hmac = await wharf(['sessions', 'update', String(id), '--signing', 'hmac', '--events', 'messages.received']);
    expect(hmac.status, hmac.stderr).toBe(0);
    expect(hmac.stderr).toBe('');
    expect(hmac.stdout).toMatch(new RegExp(`^Updated session ${id}\\nid: ${id}\\nname: Tuned\\n`));
    expect(hmac.stdout).toContain('\nwebhook_enabled: true\nwebhook_events: messages.received\nwebhook_signing: hmac\n');
    expect(hmac.stdout).toContain('\nlog_messages: true\n');
    const signed = await receiveAt(id, '/tuned', 'signed with hmac');
    expect(signed.headers['x-webhook-signature']).toBe(hexHmac(secret, signed.body));
    const headers = {
      'webhook-id': String(signed.headers['webhook-id']),
      'webhook-timestamp': String(signed.headers['webhook-timestamp']),
      'webhook-signature': String(signed.headers['webhook-signature']),
    };
    expect(new Webhook(secret).verify(signed.body, headers)).toMatchObject({ event: 'messages.received' });

    // Paused: the event leaves no dispatch record, and the command says why nothing will arrive.
    const before = await dispatchCount(id);
    const off = await wharf(['sessions', 'update', String(id), '--no-webhook-enabled']);
    expect(off.status, off.stderr).toBe(0);
    expect(off.stderr).toBe(`wharf: note: session ${id} delivers no webhooks: webhook_enabled is false (--webhook-enabled)\n`);
    const r = await wharf(['sandbox', 'receive', '--session', String(id), '--from', '+14155559999', '--text', 'not delivered']);
    expect(r.status, r.stderr).toBe(0);
    expect(await dispatchCount(id)).toBe(before);

    // Everything at once: a new URL, enabled again, all events, back to the plain secret.
    const back = await json([
      'sessions',
      'update',
      String(id),
      '--webhook-url',
      receiver.url('/moved'),
      '--webhook-enabled',
      '--events',
      'all',
      '--signing',
      'secret',
    ]);
    expect(back).toMatchObject({
      id,
      name: 'Tuned',
      log_messages: true,
      webhook_url: receiver.url('/moved'),
      webhook_enabled: true,
      webhook_events: [],
      webhook_signing: 'secret',
    });
    expect(back).not.toHaveProperty('webhook_secret');
    const moved = await receiveAt(id, '/moved', 'to the new URL');
    expect(moved.headers['x-webhook-signature']).toBe(secret);
    expect(receiver.requests.filter((q) => q.path === '/tuned' && q.json?.data?.message?.conversation === 'to the new URL')).toEqual([]);

    // --webhook-url "" removes the URL; --events none unsubscribes.
    const cleared = await wharf(['sessions', 'update', String(id), '--webhook-url', '', '--events', 'none']);
    expect(cleared.status, cleared.stderr).toBe(0);
    expect(cleared.stdout).toContain('\nwebhook_url: -\nwebhook_enabled: true\nwebhook_events: - (none)\n');
    expect(cleared.stderr).toBe(
      `wharf: note: session ${id} delivers no webhooks: no webhook_url (--webhook-url URL); webhook_events subscribes to nothing (--events all, or names)\n`,
    );
  }, 90_000);

  it('answers bad input in one line and changes nothing', async () => {
    const created = await json(['sessions', 'create', '--sandbox', '--name', 'Strict', '--webhook-url', receiver.url('/strict')]);
    const id = String(created.id);
    const sessions = (await json(['sessions', 'list'])).length;

    const badSigning = await wharf(['sessions', 'update', id, '--signing', 'sha256']);
    expect(badSigning.status).toBe(2);
    expect(badSigning.stderr).toMatch(/^wharf: Invalid values:\s+Argument: signing, Given: "sha256", Choices: "secret", "hmac" \(see wharf --help\)\n$/);
    const createBad = await wharf(['sessions', 'create', '--sandbox', '--name', 'Never', '--webhook-url', receiver.url('/never'), '--signing', 'md5']);
    expect(createBad.status).toBe(2);
    expect((await json(['sessions', 'list'])).length).toBe(sessions);

    expect(await wharf(['sessions', 'update', id])).toMatchObject({
      status: 2,
      stdout: '',
      stderr:
        'wharf: nothing to update: give --webhook-url, --webhook-enabled, --events, --signing, --name, --phone, --account-protection or --log-messages (see wharf --help)\n',
    });
    const unknown = await wharf(['sessions', 'update', id, '--events', 'messages.received,message.recieved']);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toBe(
      'wharf: The given data was invalid. (webhook_events.1: unknown event "message.recieved" (GET /api/webhook-events lists them))\n',
    );
    expect(await wharf(['sessions', 'update', id, '--events', 'all,messages.received'])).toMatchObject({
      status: 1,
      stderr: 'wharf: --events: "all" and "none" stand alone, not beside event names\n',
    });
    const badUrl = await wharf(['sessions', 'update', id, '--webhook-url', 'ftp://example.com/x']);
    expect(badUrl.status).toBe(1);
    expect(badUrl.stderr).toMatch(/^wharf: The given data was invalid\. \(.*http or https.*\)\n$/);
    expect(await wharf(['sessions', 'update', '999999', '--webhook-enabled'])).toMatchObject({ status: 1, stderr: 'wharf: Session not found\n' });
    expect(await wharf(['sessions', 'update', 'x1', '--webhook-enabled'])).toMatchObject({
      status: 1,
      stderr: 'wharf: session id must be a positive integer: x1\n',
    });

    // Nothing above changed the session.
    expect(await json(['sessions', 'get', id])).toMatchObject({
      webhook_url: receiver.url('/strict'),
      webhook_enabled: true,
      webhook_events: [],
      webhook_signing: 'secret',
    });
  }, 90_000);
});
