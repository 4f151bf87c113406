import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The outside witness for HTTP effects: a server on 127.0.0.1 that counts every request per
 * idempotency key. `GET /status/<key>` is the honest status lookup the reconciler uses.
 */
export interface WitnessServer {
  readonly url: string;
  /** Effects per idempotency key. */
  readonly counts: Map<string, number>;
  close(): Promise<void>;
}

export const startWitnessServer = async (): Promise<WitnessServer> => {
  const counts = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    if (req.method === "POST" && req.url === "/effects") {
      const key = String(req.headers["idempotency-key"] ?? "");
      let body = "";
      req.on("data", (d) => {
        body += d;
      });
      req.on("end", () => {
        counts.set(key, (counts.get(key) ?? 0) + 1);
        res.writeHead(201, { "content-type": "application/json" });
        res.end(JSON.stringify({ accepted: true, key, body: JSON.parse(body || "null") }));
      });
      return;
    }
    const status = /^\/status\/(.+)$/.exec(req.url ?? "");
    if (req.method === "GET" && status) {
      const key = decodeURIComponent(status[1]!);
      const found = counts.has(key);
      res.writeHead(found ? 200 : 404, { "content-type": "application/json" });
      res.end(JSON.stringify(found ? { accepted: true, key } : { found: false }));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
};
