import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

/** One answer of a {@link scriptedServer}: a status, headers and a JSON body (or `raw` text as it is). */
export interface ScriptedAnswer {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: unknown;
  readonly raw?: string;
}

/** A request the server received, as it arrived. */
export interface ReceivedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly at: number;
}

/**
 * A real HTTP server on 127.0.0.1 (port 0) that answers the scripted answers in turn, then
 * `otherwise` for every later request; it keeps each request it received (the outside witness).
 */
export const scriptedServer = async (
  script: ReadonlyArray<ScriptedAnswer>,
  otherwise: (request: ReceivedRequest) => ScriptedAnswer,
) => {
  const received: ReceivedRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const request = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        at: Date.now(),
      };
      const answer = script[received.length] ?? otherwise(request);
      received.push(request);
      res.writeHead(answer.status, { "content-type": "application/json", ...answer.headers });
      res.end(answer.raw ?? (answer.body === undefined ? "" : JSON.stringify(answer.body)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received: (): ReadonlyArray<ReceivedRequest> => received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};
