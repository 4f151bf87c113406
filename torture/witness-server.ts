import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The outside witness for HTTP effects: a server on 127.0.0.1 that counts every request per
 * idempotency key, as a real API with idempotency keys would keep them.
 *
 * - `POST /effects` acts (counted) unless its key was reserved: then it is refused with 409 and
 *   never counted.
 * - `POST /lookup/<key>` is the lookup the reconciler uses, atomic: `{ found: true, result }` when
 *   the key acted, else it reserves the key and answers `{ found: false, reserved: true }`.
 * - `GET /status/<key>` only looks (200 or 404); it proves nothing about a request still on its way.
 */
export interface WitnessServer {
  readonly url: string;
  /** Effects per idempotency key. */
  readonly counts: Map<string, number>;
  /** Keys a lookup reserved: refused from then on. */
  readonly reserved: Set<string>;
  close(): Promise<void>;
}

export const startWitnessServer = async (): Promise<WitnessServer> => {
  const counts = new Map<string, number>();
  const reserved = new Set<string>();
  const answer = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const server: Server = createServer((req, res) => {
    if (req.method === "POST" && req.url === "/effects") {
      const key = String(req.headers["idempotency-key"] ?? "");
      let body = "";
      req.on("data", (d) => {
        body += d;
      });
      req.on("end", () => {
        // Decided when the request has arrived, as the remote side of a real API would.
        if (reserved.has(key)) {
          answer(res, 409, { refused: true, key, reason: "the key was reserved by a lookup" });
          return;
        }
        counts.set(key, (counts.get(key) ?? 0) + 1);
        answer(res, 201, { accepted: true, key, body: JSON.parse(body || "null") });
      });
      return;
    }
    const lookup = /^\/lookup\/(.+)$/.exec(req.url ?? "");
    if (req.method === "POST" && lookup) {
      const key = decodeURIComponent(lookup[1]!);
      if (counts.has(key)) {
        answer(res, 200, { found: true, result: { accepted: true, key } });
        return;
      }
      reserved.add(key);
      answer(res, 200, { found: false, reserved: true });
      return;
    }
    const status = /^\/status\/(.+)$/.exec(req.url ?? "");
    if (req.method === "GET" && status) {
      const key = decodeURIComponent(status[1]!);
      const found = counts.has(key);
      answer(res, found ? 200 : 404, found ? { accepted: true, key } : { found: false });
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    reserved,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
};
