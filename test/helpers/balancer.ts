// Test helper: a round-robin HTTP load balancer in front of the instances of a cluster
// (test/helpers/cluster.ts), as Caddy's `reverse_proxy a b { lb_try_duration }` does in the
// README's deployment sketch: each request goes to the next backend that is up; one that refuses
// the connection (killed) is skipped and the request tried on the next, so a client of the
// balancer does not see an instance die (a write only when the connection was refused: it never
// reached the dead one; a read also when its connection was cut). The request body is buffered for that retry. The Host
// header is passed unchanged (the cluster's public URL is the balancer's).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Backend {
  readonly index: number;
  /** Where it listens, or undefined when it is known to be down. */
  readonly target: string | undefined;
}

export interface Balancer {
  url: string;
  /** Requests answered by each backend, by index. */
  served: number[];
  /** Requests that found a backend refusing and were tried on another. */
  retried: number;
  close(): Promise<void>;
}

/** The request never reached the backend (refused), or it did not change anything there (a read that was cut). */
function retryable(err: unknown, method: string | undefined): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ECONNREFUSED' || ((method === 'GET' || method === 'HEAD') && (code === 'ECONNRESET' || code === 'EPIPE'));
}

function forward(target: string, req: http.IncomingMessage, body: Buffer): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const url = new URL(req.url ?? '/', target);
    const out = http.request(url, { method: req.method, headers: req.headers, agent: false }, resolve);
    out.once('error', reject);
    out.end(body);
  });
}

export async function startBalancer(backends: () => readonly Backend[]): Promise<Balancer> {
  let next = 0;
  const state = { served: [] as number[], retried: 0 };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const up = backends().filter((b) => b.target !== undefined);
    for (let tries = 0; tries < up.length; tries++) {
      const backend = up[next++ % up.length]!;
      try {
        const answer = await forward(backend.target!, req, body);
        state.served[backend.index] = (state.served[backend.index] ?? 0) + 1;
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        return;
      } catch (err) {
        if (!retryable(err, req.method)) break;
        state.retried++;
      }
    }
    res.writeHead(502, { 'content-type': 'text/plain' }).end('no instance answered\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get served() {
      return state.served;
    },
    get retried() {
      return state.retried;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
