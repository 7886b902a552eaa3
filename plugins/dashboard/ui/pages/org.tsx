/** Organizations: yours (switch, create), the active one's members and roles, invitations sent and received. */
import { useState } from 'preact/hooks';
import { DISPLAY_NAME_MAX, ORG_SLUG_MAX } from '../../../../core/limits.ts';
import { api } from '../api.ts';
import { Card, Command, Confirm, Empty, ErrorBox, Field, Loading } from '../components.tsx';
import { when } from '../format.ts';
import { useAction, useLoad } from '../hooks.ts';
import { useMe } from '../session.ts';
import type { Invitation, Member, ReceivedInvitation, Role } from '../types.ts';

const ROLES: Role[] = ['owner', 'admin', 'member'];

export function Organization({ embedded = false }: { embedded?: boolean }) {
  const { me, org } = useMe();
  return (
    <>
      {!embedded && <h1 tabIndex={-1}>Organization</h1>}
      <Orgs />
      {org && <Members orgId={org.id} role={org.role} />}
      {org && me.mode === 'builtin' && (org.role === 'owner' || org.role === 'admin') && <Invitations orgId={org.id} role={org.role} />}
      {me.mode === 'builtin' && <Received />}
      <Card title="Command-line sign-in">
        {me.mode === 'builtin' ? (
          <p>
            <Command>{`npx wharf login --instance ${location.origin}`}</Command> (run in the folder where you ran <code>npm start</code>; with the single
            binary, <Command>{`./wharf login --instance ${location.origin}`}</Command>) prints a code; approve it on the{' '}
            <a href="/device">device approval page</a> (it works without JavaScript, too).
          </p>
        ) : (
          <p>
            <Command>{`npx wharf login --instance ${location.origin}`}</Command> (with the single binary,{' '}
            <Command>{`./wharf login --instance ${location.origin}`}</Command>) prints a code to approve at your sign-in provider.
          </p>
        )}
      </Card>
    </>
  );
}

function Orgs() {
  const { me, switchOrg } = useMe();
  const [name, setName] = useState('');
  const [slug, setSlug] = useState('');
  const create = useAction(async () => {
    const created = await api<{ id: string }>('POST', '/api/orgs', slug.trim() ? { name, slug: slug.trim() } : { name });
    setName('');
    setSlug('');
    // Switching reads the session again, which lists the new organization.
    await switchOrg(created.id);
  });
  const change = useAction((id: string) => switchOrg(id));
  return (
    <Card title="Your organizations">
      {me.orgs.length === 0 && <Empty>You are not in any organization yet.</Empty>}
      <ul class="rows">
        {me.orgs.map((o) => (
          <li key={o.id}>
            <strong>{o.name}</strong> <span class="muted mono">{o.slug}</span> <span class="muted">{o.role}</span>{' '}
            {o.id === me.activeOrgId ? (
              <span class="badge s-connected">Active</span>
            ) : (
              <button type="button" class="small secondary" onClick={() => void change.run(o.id)} disabled={change.busy}>
                Switch to {o.name}
              </button>
            )}
          </li>
        ))}
      </ul>
      <ErrorBox error={change.error} />
      <h3>Create an organization</h3>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void create.run();
        }}
      >
        <Field label="Name">
          <input name="org-name" required maxLength={DISPLAY_NAME_MAX} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field label="Slug" hint="Optional: made from the name">
          <input name="org-slug" maxLength={ORG_SLUG_MAX} value={slug} onInput={(e) => setSlug(e.currentTarget.value)} />
        </Field>
        <button type="submit" disabled={create.busy}>
          Create and switch
        </button>
      </form>
      <ErrorBox error={create.error} />
    </Card>
  );
}

function Members({ orgId, role }: { orgId: string; role: Role }) {
  const { me, refresh } = useMe();
  const members = useLoad((signal) => api<{ members: Member[] }>('GET', `/api/orgs/${orgId}/members`, undefined, { signal }).then((r) => r.members), [orgId]);
  const [removing, setRemoving] = useState<Member | null>(null);
  const manager = role === 'owner' || role === 'admin';
  const setRole = useAction(async (m: Member, next: Role) => {
    await api('PATCH', `/api/orgs/${orgId}/members/${m.userId}`, { role: next });
    await members.reload();
    if (m.userId === me.user.id) await refresh();
  });
  const remove = useAction(async (m: Member) => {
    await api('DELETE', `/api/orgs/${orgId}/members/${m.userId}`);
    setRemoving(null);
    if (m.userId === me.user.id) await refresh();
    else await members.reload();
  });
  return (
    <Card title="Members">
      <ErrorBox error={members.error ?? setRole.error} />
      {!members.data && !members.error && <Loading what="members" />}
      {members.data && (
        <table class="list">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col">Since</th>
              <th scope="col">
                <span class="sr">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {members.data.map((m) => {
              const self = m.userId === me.user.id;
              // Only owners make, change or remove owners (the API says so too).
              const editable = manager && !self && (role === 'owner' || m.role !== 'owner');
              return (
                <tr key={m.userId}>
                  <td data-label="Name">
                    {m.name ?? '—'}
                    {self ? ' (you)' : ''}
                  </td>
                  <td data-label="Email">{m.email}</td>
                  <td data-label="Role">
                    {editable ? (
                      <select aria-label={`Role of ${m.email ?? m.name}`} value={m.role} onChange={(e) => void setRole.run(m, e.currentTarget.value as Role)}>
                        {ROLES.filter((r) => role === 'owner' || r !== 'owner').map((r) => (
                          <option key={r}>{r}</option>
                        ))}
                      </select>
                    ) : (
                      m.role
                    )}
                  </td>
                  <td data-label="Since">{when(m.since)}</td>
                  <td class="row-actions">
                    {(editable || self) && (
                      <button
                        type="button"
                        class="small danger"
                        onClick={() => {
                          remove.clear();
                          setRemoving(m);
                        }}
                      >
                        {self ? 'Leave' : 'Remove'}
                      </button>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <Confirm
        open={removing !== null}
        title={removing?.userId === me.user.id ? 'Leave this organization?' : `Remove ${removing?.email ?? ''}?`}
        action={removing?.userId === me.user.id ? 'Leave' : 'Remove'}
        busy={remove.busy}
        error={remove.error}
        onConfirm={() => removing && void remove.run(removing)}
        onClose={() => setRemoving(null)}
      >
        <p>Their personal access tokens for this organization stop working.</p>
      </Confirm>
    </Card>
  );
}

function Invitations({ orgId, role }: { orgId: string; role: Role }) {
  const pending = useLoad(
    (signal) => api<{ invitations: Invitation[] }>('GET', `/api/orgs/${orgId}/invitations`, undefined, { signal }).then((r) => r.invitations),
    [orgId],
  );
  const [email, setEmail] = useState('');
  const [newRole, setNewRole] = useState<Role>('member');
  const [sent, setSent] = useState<string | null>(null);
  const invite = useAction(async () => {
    await api('POST', `/api/orgs/${orgId}/invitations`, { email, role: newRole });
    setSent(email);
    setEmail('');
    await pending.reload();
  });
  const revoke = useAction(async (id: string) => {
    await api('DELETE', `/api/orgs/${orgId}/invitations/${id}`);
    await pending.reload();
  });
  return (
    <Card title="Invitations">
      <p class="muted">Nobody is added without saying yes: the person signs in with that email and accepts. Wharf sends no email; tell them.</p>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void invite.run();
        }}
      >
        <Field label="Email">
          <input type="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        </Field>
        <Field label="Role">
          <select value={newRole} onChange={(e) => setNewRole(e.currentTarget.value as Role)}>
            {ROLES.filter((r) => role === 'owner' || r !== 'owner').map((r) => (
              <option key={r}>{r}</option>
            ))}
          </select>
        </Field>
        <button type="submit" disabled={invite.busy}>
          Invite
        </button>
      </form>
      <ErrorBox error={invite.error ?? pending.error ?? revoke.error} />
      {sent && (
        <p role="status" class="ok">
          Invitation for {sent} recorded.
        </p>
      )}
      {pending.data?.length === 0 && <Empty>No pending invitations.</Empty>}
      <ul class="rows">
        {pending.data?.map((i) => (
          <li key={i.id}>
            {i.email}{' '}
            <span class="muted">
              as {i.role}, expires {when(i.expiresAt)}
            </span>{' '}
            <button type="button" class="small secondary" onClick={() => void revoke.run(i.id)}>
              Revoke
            </button>
          </li>
        ))}
      </ul>
    </Card>
  );
}

function Received() {
  const { refresh, switchOrg } = useMe();
  const received = useLoad(
    (signal) => api<{ invitations: ReceivedInvitation[] }>('GET', '/api/orgs/invitations', undefined, { signal }).then((r) => r.invitations),
    [],
  );
  const answer = useAction(async (i: ReceivedInvitation, accept: boolean) => {
    await api('POST', `/api/orgs/invitations/${i.id}/${accept ? 'accept' : 'decline'}`, {});
    if (accept) await switchOrg(i.org.id);
    await received.reload();
    await refresh();
  });
  if (!received.data?.length && !received.error) return null;
  return (
    <Card title="Invitations for you">
      <ErrorBox error={received.error ?? answer.error} />
      <ul class="rows">
        {received.data?.map((i) => (
          <li key={i.id}>
            <strong>{i.org.name}</strong> as {i.role}
            {i.invitedBy ? <span class="muted"> from {i.invitedBy.name ?? i.invitedBy.email}</span> : null}{' '}
            <button type="button" class="small" onClick={() => void answer.run(i, true)} disabled={answer.busy}>
              Accept
            </button>
            <button type="button" class="small secondary" onClick={() => void answer.run(i, false)} disabled={answer.busy}>
              Decline
            </button>
          </li>
        ))}
      </ul>
    </Card>
  );
}
