/** Live session events (`GET /api/session-events`, server-sent events) as a hook. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { eventStream, query, type StreamState } from './api.ts';

export interface SessionEventPayload {
  event: string;
  sessionId: number;
  timestamp: number;
  data: Record<string, unknown> | null;
}

/** Subscribes while mounted; `onEvent` gets each event's payload. Returns the stream's state. */
export function useSessionEvents(options: { sessionId?: number | string; events: string[] }, onEvent: (payload: SessionEventPayload) => void): StreamState {
  const [state, setState] = useState<StreamState>({ state: 'connecting' });
  const handler = useRef(onEvent);
  handler.current = onEvent;
  const path = `/api/session-events${query({ session_id: options.sessionId, events: options.events.join(',') })}`;
  useEffect(() => eventStream(path, (_event, data) => handler.current(data as SessionEventPayload), setState), [path]);
  return state;
}

/** A line saying whether the page is live. */
export function liveText(state: StreamState): string {
  if (state.state === 'open') return 'Live';
  if (state.state === 'connecting') return 'Connecting…';
  return state.retrying ? `Reconnecting (${state.error.message})` : `Not live: ${state.error.message}`;
}
