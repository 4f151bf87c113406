import net from "node:net";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { checkout, ended, giveBack } from "../../src/adapters/stores/postgres/pooled.js";

/**
 * A PostgreSQL restart can end a session in the very packet that completed its connection: the
 * server says "ready" and, right behind it, "terminating connection due to administrator command"
 * (FATAL 57P01). A connection checked out of the pool at that moment had no error listener until a
 * microtask later, so the error went to nobody and crashed the worker (the fault harness found it:
 * `torture/workers.ts --faults pg-restart`). This server answers every connection that way.
 */
const endingServer = async (): Promise<{ port: number; close: () => Promise<void> }> => {
  const message = (type: string, body: Buffer) => {
    const head = Buffer.alloc(5);
    head.write(type, 0, "latin1");
    head.writeInt32BE(body.length + 4, 1);
    return Buffer.concat([head, body]);
  };
  const authOk = message("R", Buffer.from([0, 0, 0, 0]));
  const ready = message("Z", Buffer.from("I", "latin1"));
  const fatal = message(
    "E",
    Buffer.concat([
      Buffer.from("SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0", "latin1"),
      Buffer.from([0]),
    ]),
  );
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.once("data", () => {
      // The startup message: ready, and ended, in one write.
      socket.write(Buffer.concat([authOk, ready, fatal]));
      setTimeout(() => socket.destroy(), 50);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
};

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

describe("a PostgreSQL session ended in the packet that completed its connection", () => {
  it("the checked-out connection is marked ended by the journal's own watch, and the process gets no unhandled error", async () => {
    const server = await endingServer();
    cleanups.push(server.close);
    const pool = new pg.Pool({ host: "127.0.0.1", port: server.port, user: "postgres", database: "x" });
    pool.on("error", () => {});
    cleanups.push(async () => {
      await Promise.race([pool.end().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 1_000))]);
    });
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", onUncaught);
    cleanups.push(async () => {
      process.off("uncaughtException", onUncaught);
    });
    const client = await checkout(pool);
    // The FATAL arrived before the caller resumed: the watch saw it, so the journal knows the
    // session is gone (a COMMIT is never sent on it) and gives the connection back broken.
    expect(ended.has(client)).toBe(true);
    await expect(client.query("SELECT 1")).rejects.toThrow();
    giveBack(client);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(uncaught).toEqual([]);
  });
});
