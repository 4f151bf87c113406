import { execFile, execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";

const run = promisify(execFile);

/** Where Debian's PostgreSQL 15 keeps its programs (HOLDFAST_TEST_PG_BIN overrides). */
const BIN = process.env.HOLDFAST_TEST_PG_BIN || "/usr/lib/postgresql/15/bin";

/**
 * A PostgreSQL server of the test's own, in a temp folder, on a free port: for faults that take
 * the server down (a restart, a SIGKILL of the postmaster), which must never touch the shared
 * server at 127.0.0.1:5432 other test files use at the same time. Runs as the `postgres` user
 * (initdb refuses root), trusts local connections, and is stopped and removed by {@link stop}.
 */
export interface PrivatePg {
  readonly port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres, with `?schema=` when given. */
  readonly url: (schema?: string) => string;
  /** `pg_ctl restart -m fast`: sessions are ended cleanly, the server is back when it resolves. */
  readonly restartFast: () => Promise<void>;
  /** SIGKILL the postmaster (and what it leaves behind), then start again: a crash and recovery. */
  readonly killAndStart: () => Promise<void>;
  /** SIGKILL the postmaster and leave the server down (start it with {@link start}). */
  readonly kill: () => Promise<void>;
  readonly start: () => Promise<void>;
  /** Stop the server (immediate) and remove its folder. */
  readonly stop: () => Promise<void>;
  /** The same, synchronously: for a process that is exiting (an interrupted harness). */
  readonly stopNow: () => void;
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });

const asPostgres = (program: string, args: ReadonlyArray<string>) =>
  run("runuser", ["-u", "postgres", "--", join(BIN, program), ...args], { timeout: 120_000 });

/** The processes whose parent is `pid` (a postmaster's backends and helpers), read from /proc. */
const childrenOf = (pid: number): number[] => {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) found.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
};

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Create and start a private server. Fails loudly when the PostgreSQL programs are missing (never a
 * skip): install them (`apt-get install postgresql-15`) or point HOLDFAST_TEST_PG_BIN at them.
 */
export const startPrivatePg = async (): Promise<PrivatePg> => {
  if (!existsSync(join(BIN, "initdb")))
    throw new Error(
      `initdb is not at ${join(BIN, "initdb")}: the PostgreSQL restart tests need the server programs (apt-get install postgresql-15, or set HOLDFAST_TEST_PG_BIN)`,
    );
  const dir = mkdtempSync(join(tmpdir(), "holdfast-pg-"));
  chownSync(
    dir,
    Number((await run("id", ["-u", "postgres"])).stdout.trim()),
    Number((await run("id", ["-g", "postgres"])).stdout.trim()),
  );
  const data = join(dir, "data");
  const port = await freePort();
  await asPostgres("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]);
  const serverOptions = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const url = (schema?: string) =>
    `postgres://postgres@127.0.0.1:${port}/postgres${schema ? `?schema=${schema}` : ""}`;

  const start = async () => {
    // A postmaster SIGKILLed a moment ago may leave backends attached to its shared memory for a
    // while: the new one refuses to start until they are gone.
    for (let attempt = 1; ; attempt++) {
      try {
        await asPostgres("pg_ctl", ["-D", data, "-o", serverOptions, "-l", join(dir, "log"), "-w", "start"]);
        return;
      } catch (error) {
        if (attempt >= 20)
          throw new Error(`the private PostgreSQL in ${dir} did not start: ${String(error)}`);
        await sleep(250);
      }
    }
  };
  const postmaster = (): number | null => {
    try {
      return Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
    } catch {
      return null;
    }
  };
  const kill = async () => {
    const pid = postmaster();
    if (!pid || !alive(pid)) return;
    const children = childrenOf(pid);
    process.kill(pid, "SIGKILL");
    for (let i = 0; i < 40 && children.some(alive); i++) await sleep(50);
    for (const child of children.filter(alive)) process.kill(child, "SIGKILL");
  };

  await start();
  // The shared test server has a `test` database; here the default `postgres` one serves.
  const client = new pg.Client({ connectionString: url() });
  await client.connect();
  await client.end();
  return {
    port,
    url,
    restartFast: async () => {
      await asPostgres("pg_ctl", [
        "-D",
        data,
        "-m",
        "fast",
        "-w",
        "restart",
        "-o",
        serverOptions,
        "-l",
        join(dir, "log"),
      ]);
    },
    killAndStart: async () => {
      await kill();
      await start();
    },
    kill,
    start,
    stop: async () => {
      await asPostgres("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
    stopNow: () => {
      try {
        execFileSync(
          "runuser",
          ["-u", "postgres", "--", join(BIN, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"],
          {
            stdio: "ignore",
            timeout: 30_000,
          },
        );
      } catch {
        // Already down.
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
};
