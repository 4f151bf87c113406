import { serve } from "../../../src/adapters/surfaces/http/serve.js";

/**
 * `serve()` in a process of its own (the 100-client test: the server's work and the clients' on
 * different cores, as they would be). Prints `{"url": …}` once listening; closes on SIGTERM.
 */
const server = await serve({
  store: process.env.SSE_STORE!,
  port: 0,
  token: process.env.SSE_TOKEN!,
  live: JSON.parse(process.env.SSE_LIVE ?? "{}"),
});
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
process.once("SIGTERM", () => {
  void server.close().then(() => process.exit(0));
});
