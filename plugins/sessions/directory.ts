/**
 * Changes to a connected session's contacts and groups: each is made on the session's network,
 * then written to the session's audit log (a participant change records only the participants
 * it changed). Reads go to the network as they are.
 */
import type { Contact, GroupMetadata, ParticipantResult } from './networks/types.ts';
import type { ConnectedSession, Sessions } from './service.ts';

/** What a participant change is audited as. */
const PARTICIPANT_ACTIONS = {
  add: 'group.participants_added',
  remove: 'group.participants_removed',
  promote: 'group.participants_promoted',
  demote: 'group.participants_demoted',
} as const;

export class Directory {
  readonly #sessions: Sessions;

  constructor(sessions: Sessions) {
    this.#sessions = sessions;
  }

  async saveContact({ session, network, actor }: ConnectedSession, input: { jid: string; fullName: string }): Promise<Contact> {
    const contact = await network.upsertContact(session, input);
    await this.#sessions.audit(session, actor, 'contact.saved', { jid: contact.id });
    return contact;
  }

  async setBlocked({ session, network, actor }: ConnectedSession, jid: string, blocked: boolean): Promise<void> {
    await network.setBlocked(session, jid, blocked);
    await this.#sessions.audit(session, actor, blocked ? 'contact.blocked' : 'contact.unblocked', { jid });
  }

  async createGroup({ session, network, actor }: ConnectedSession, subject: string, participants: string[]): Promise<GroupMetadata> {
    const group = await network.createGroup(session, subject, participants);
    await this.#sessions.audit(session, actor, 'group.created', { jid: group.id, participants: group.size - 1 });
    return group;
  }

  async acceptInvite({ session, network, actor }: ConnectedSession, code: string): Promise<string> {
    const jid = await network.acceptGroupInvite(session, code);
    await this.#sessions.audit(session, actor, 'group.invite_accepted', { jid });
    return jid;
  }

  async changeParticipants(
    { session, network, actor }: ConnectedSession,
    jid: string,
    action: keyof typeof PARTICIPANT_ACTIONS,
    participants: string[],
  ): Promise<ParticipantResult[]> {
    const results = await network.updateParticipants(session, jid, action, participants);
    const done = results.filter((r) => r.status === 200).map((r) => r.id);
    if (done.length) await this.#sessions.audit(session, actor, PARTICIPANT_ACTIONS[action], { jid, participants: done });
    return results;
  }

  async updateGroupSettings(
    { session, network, actor }: ConnectedSession,
    jid: string,
    settings: { subject?: string; description?: string; announce?: boolean; restrict?: boolean },
  ): Promise<GroupMetadata> {
    const group = await network.updateGroupSettings(session, jid, settings);
    await this.#sessions.audit(session, actor, 'group.settings_updated', { jid, fields: Object.keys(settings) });
    return group;
  }

  async leaveGroup({ session, network, actor }: ConnectedSession, jid: string): Promise<void> {
    await network.leaveGroup(session, jid);
    await this.#sessions.audit(session, actor, 'group.left', { jid });
  }
}
