/**
 * The networks the messaging tests run on, so one test runs on both: the sandbox, and a whatsapp
 * session connected through the fake network (test/helpers/fake-whatsapp.ts) with inbound
 * messages replayed in Baileys 7's shapes. A test file that uses `whatsapp` mocks the `baileys`
 * module with the same fake (vi.mock is hoisted per file):
 *
 *   const fake = vi.hoisted(() => ({}) as { network?: FakeWhatsApp });
 *   vi.mock('baileys', async (importOriginal) => mockedBaileys(await importOriginal(), fake.network!, Boom));
 *   const networks = testNetworks((fake.network = new FakeWhatsApp()));
 */
import type { WAMessage } from 'baileys';
import { expect } from 'vitest';
import type { TestApp } from '../../helpers/app.ts';
import type { FakeWhatsApp } from '../../helpers/fake-whatsapp.ts';
import type { WhatsAppNetwork } from '../../../plugins/sessions/networks/whatsapp/index.ts';
import type { Sessions } from '../../../plugins/sessions/service.ts';
import { call, connectedWhatsApp, eventsOf, type SessionInfo, sandboxSession, until, WHATSAPP_TEST_TOML } from './helpers.ts';

export interface InboundText {
  from: string;
  text: string;
  pushName?: string;
  chat?: 'personal' | 'group' | 'newsletter';
}

/** A network as the tests see it. */
export interface TestNetwork {
  name: 'sandbox' | 'whatsapp';
  /** Settings the app needs for this network (placed after the test's own [plugins.sessions] keys). */
  toml: string;
  /** A connected session of this network. */
  session(app: TestApp, pat: string, body?: Record<string, unknown>): Promise<SessionInfo>;
  /** Makes a session receive a text; answers the message key as the session's events carry it. */
  receive(app: TestApp, session: SessionInfo, input: InboundText): Promise<Record<string, unknown>>;
  /** Waits until a send's log row reached `status` (the sandbox answers at once; WhatsApp acks later). */
  settled(app: TestApp, session: SessionInfo, msgId: number, status: string): Promise<void>;
  /** A recipient number whose sends fail for good. */
  unreachable: string;
  /**
   * What `send-message` answers as status for a text to another session of the same network: the
   * message's status when the answer is written (a matcher where the network's ack may come first).
   */
  sentStatus: string;
}

const groupOf = (digits: string) => `120363${digits.slice(-12).padStart(12, '0')}@g.us`;
const newsletterOf = (digits: string) => `120363${digits.slice(-12).padStart(12, '0')}@newsletter`;

export function testNetworks(fake: FakeWhatsApp): TestNetwork[] {
  const sandbox: TestNetwork = {
    name: 'sandbox',
    toml: '',
    session: (app, pat, body = {}) => sandboxSession(app, pat, body),
    async receive(app, session, input) {
      const res = await call(app, session.apiKey, 'POST', '/api/sandbox/receive', input);
      if (res.status !== 200) throw new Error(`sandbox receive failed: ${res.status} ${res.text}`);
      return res.body.data.key;
    },
    async settled() {},
    unreachable: '+99912345678',
    sentStatus: 'delivered',
  };
  const whatsapp: TestNetwork = {
    name: 'whatsapp',
    toml: WHATSAPP_TEST_TOML,
    session: (app, pat, body = {}) => connectedWhatsApp(app, pat, fake, { name: 'WhatsApp', ...body }),
    async receive(app, session, input) {
      const sender = fake.account(input.from, input.pushName ?? input.from);
      const id = `3A${Date.now().toString(16).toUpperCase()}${Math.floor(Math.random() * 1e8)
        .toString(16)
        .toUpperCase()}`;
      const chat = input.chat ?? 'personal';
      const key: WAMessage['key'] =
        chat === 'group'
          ? {
              remoteJid: groupOf(sender.digits),
              fromMe: false,
              id,
              participant: `${sender.lid}@lid`,
              participantAlt: `${sender.digits}@s.whatsapp.net`,
              addressingMode: 'lid',
            }
          : chat === 'newsletter'
            ? { remoteJid: newsletterOf(sender.digits), fromMe: false, id, server_id: '101' }
            : { remoteJid: `${sender.lid}@lid`, remoteJidAlt: `${sender.digits}@s.whatsapp.net`, fromMe: false, id, addressingMode: 'lid' };
      const before = (await eventsOf(app, session.id)).at(-1)?.id ?? 0;
      // What Baileys emits for an incoming text: the message, and the sender's push name (contacts.update).
      fake.socketOf(session.id)!.replay({
        'messages.upsert': {
          type: 'notify',
          messages: [
            {
              key,
              message: { conversation: input.text },
              pushName: chat === 'newsletter' ? undefined : (input.pushName ?? input.from),
              messageTimestamp: Math.floor(Date.now() / 1000),
            },
          ],
        },
        ...(chat === 'newsletter' ? {} : { 'contacts.update': [{ id: `${sender.lid}@lid`, notify: input.pushName ?? input.from }] }),
      });
      await ((app.running.services.sessions as Sessions).network({ type: 'whatsapp' } as never) as WhatsAppNetwork).idle(session.id);
      const upsert = (await eventsOf(app, session.id, before)).find(
        (e) => e.event === 'messages.upsert' && (e.payload.data as { key: { id: string } }).key.id === id,
      );
      if (!upsert) throw new Error(`session ${session.id} recorded no messages.upsert for the replayed message`);
      return (upsert.payload.data as { key: Record<string, unknown> }).key;
    },
    async settled(app, session, msgId, status) {
      await until(
        async () => (await call(app, session.apiKey, 'GET', `/api/messages/${msgId}/info`)).body.data?.statusText === status,
        `message ${msgId} ${status}`,
      );
    },
    unreachable: '+99912345678',
    // Handed to the socket: in progress, or already sent or delivered when the (fake) server's ack
    // or the recipient's receipt was recorded before the answer read the status (a loaded machine,
    // PostgreSQL's slower read); never failed.
    sentStatus: expect.stringMatching(/^(in_progress|sent|delivered)$/) as unknown as string,
  };
  fake.unreachable.add('99912345678');
  return [sandbox, whatsapp];
}

/** The text of a message node, whichever way the network shaped it (conversation or extendedTextMessage). */
export function textOf(message: Record<string, any> | null | undefined): string | undefined {
  return message?.conversation ?? message?.extendedTextMessage?.text;
}
