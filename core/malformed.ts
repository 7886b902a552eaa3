/**
 * Requests Node's HTTP parser refuses before any handler runs: a raw byte HTTP does not allow in
 * the URL or a header (curl sends `/files/é` unencoded), a malformed request line or header,
 * headers over the size limit, a request that timed out. Node answers those with a bare status
 * line and no body; a server here answers them in its own error shape instead, in the envelope
 * of the path the request named when it can be read.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';

/** What the parser refused, as the server's answer needs it. */
export interface MalformedRequest {
  /** Node's status for it: 400, 408 (timed out), 413 (chunk extensions too large) or 431 (headers too large). */
  status: 400 | 408 | 413 | 431;
  /** The request's path (no query), when its request line could be read. */
  path: string | undefined;
  /** What was wrong, in Node's words ("Invalid char in url path", "Request timeout"). */
  reason: string;
  /** What was wrong, for the caller: one sentence. */
  message: string;
}

export interface MalformedAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

type ParserError = NodeJS.ErrnoException & { rawPacket?: Buffer; reason?: string };

const STATUS_OF_CODE: Readonly<Record<string, MalformedRequest['status']>> = {
  HPE_HEADER_OVERFLOW: 431,
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 413,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
};

function messageOf(status: MalformedRequest['status'], reason: string): string {
  if (status === 408) return 'The request did not arrive in time; the connection is closed';
  if (status === 431) return 'The request headers are too large';
  return `The request is not valid HTTP: ${reason}${/url/i.test(reason) ? ' (a URL must be percent-encoded)' : ''}`;
}

/** The path of the request line at the start of the bytes the parser refused, if there is one. */
function pathOf(raw: Buffer | undefined, inFlight: http.ServerResponse | undefined): string | undefined {
  const line = raw ? raw.toString('utf8', 0, Math.min(raw.length, 8192)).split('\r\n', 1)[0]! : undefined;
  const target = line?.match(/^[A-Za-z]+ (\S+)/)?.[1] ?? inFlight?.req?.url;
  return target?.split('?', 1)[0];
}

/**
 * Answers what the parser refuses on `server` with `answer`'s response, under the same
 * conditions as Node's own: only while nothing of a response has been written on the
 * connection, and the connection is closed after it.
 */
export function answerMalformed(server: http.Server, answer: (request: MalformedRequest) => MalformedAnswer): void {
  server.on('clientError', (err: ParserError, socket: Duplex) => {
    // The response in flight on this connection, if any (Node's own check reads the same field).
    const inFlight = (socket as Duplex & { _httpMessage?: http.ServerResponse })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const status = STATUS_OF_CODE[err.code ?? ''] ?? 400;
    const reason = err.reason ?? err.message;
    const reply = answer({ status, path: pathOf(err.rawPacket, inFlight), reason, message: messageOf(status, reason) });
    const head = [`HTTP/1.1 ${reply.status} ${http.STATUS_CODES[reply.status] ?? ''}`];
    for (const [name, value] of Object.entries(reply.headers)) head.push(`${name}: ${value}`);
    head.push(`Content-Length: ${Buffer.byteLength(reply.body)}`, 'Connection: close', '', '');
    socket.end(head.join('\r\n') + reply.body);
    // Whatever the client still sends is not read: the connection goes once the answer is out.
    socket.once('finish', () => socket.destroy());
  });
}
