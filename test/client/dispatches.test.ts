/** `wharf dispatches list|get|redeliver` as a user runs them, against a real webhook receiver. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir, type TestApp } from '../helpers/app.ts';
import { wharfAsync } from '../helpers/cli.ts';
import { cliLogin, signIn, type SignedIn } from '../helpers/identity.ts';
import { Receiver, startWebhooksApp } from '../plugins/webhooks/helpers.ts';

let app: TestApp;
let user: SignedIn;
let receiver: Receiver;
let env: NodeJS.ProcessEnv;

const wharf = (args: string[]) => wharfAsync(args, { env });

beforeAll(async () => {
  app = await startWebhooksApp();
  receiver = await Receiver.start();
  user = await signIn(app, { orgName: 'Dispatch CLI' });
  const home = tempDir();
  expect((await cliLogin(app, user, home)).code).toBe(0);
  env = { XDG_CONFIG_HOME: home };
});
afterAll(async () => {
  await receiver?.close();
  await app?.close();
});

describe('wharf dispatches', () => {
  it('lists, shows and redelivers the dispatch records of a sandbox delivery', async () => {
    // Subscribed to messages.received only, enabled: one command.
    const created = await wharf([
      'sessions',
      'create',
      '--sandbox',
      '--name',
      'Hooked',
      '--webhook-url',
      receiver.url(),
      '--events',
      'messages.received',
      '--json',
    ]);
    expect(created.status, created.stderr).toBe(0);
    const session = JSON.parse(created.stdout) as { id: number };
    const got = await wharf(['sandbox', 'receive', '--session', String(session.id), '--from', '+14155550123', '--text', 'hello hook']);
    expect(got.status, got.stderr).toBe(0);
    await receiver.waitFor(1);

    let list = await wharf(['dispatches', 'list', '--session', String(session.id), '--json']);
    for (let i = 0; i < 50 && JSON.parse(list.stdout).data[0]?.status !== 'delivered'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      list = await wharf(['dispatches', 'list', '--session', String(session.id), '--json']);
    }
    const page = JSON.parse(list.stdout);
    expect(page.total).toBe(1);
    const dispatch = page.data[0];
    expect(dispatch).toMatchObject({ session_id: session.id, event: 'messages.received', status: 'delivered', attempt_count: 1, last_status_code: 200 });

    const text = await wharf(['dispatches', 'list']);
    expect(text.stdout.split('\n')[0]).toMatch(/^ID\s+SESSION\s+EVENT\s+STATUS\s+ATTEMPTS\s+LAST\s+CREATED$/);
    expect(text.stdout).toContain('messages.received');

    const shown = await wharf(['dispatches', 'get', String(dispatch.id)]);
    expect(shown.status, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(
      new RegExp(
        `^dispatch ${dispatch.id}: messages.received of session ${session.id} to ${receiver.url().replace(/[/.]/g, '\\$&')}\\nstatus delivered, 1 of 5 attempts\\nwebhook-id msg_`,
      ),
    );
    expect(shown.stdout).toMatch(/\n1\s+200\s+\d+ ms/);

    const again = await wharf(['dispatches', 'redeliver', String(dispatch.id), '--json']);
    expect(again.status, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ event_id: dispatch.event_id, webhook_id: dispatch.webhook_id });
    const both = await receiver.waitFor(2);
    expect(both[1]!.headers['webhook-id']).toBe(both[0]!.headers['webhook-id']);

    expect(await wharf(['dispatches', 'get', '0'])).toMatchObject({ status: 1, stderr: 'wharf: dispatch id must be a positive integer: 0\n' });
    expect(await wharf(['dispatches', 'get', '999999'])).toMatchObject({ status: 1, stderr: expect.stringMatching(/^wharf: .*not found/i) });
  }, 90_000);
});
