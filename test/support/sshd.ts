/**
 * A real OpenSSH server for the SSH tool's tests: `/usr/sbin/sshd -D` on a free port of 127.0.0.1,
 * with a host key and a client key made by `ssh-keygen` for the test, in a temp folder. Fails loudly
 * when sshd is missing (`.ci/run` installs openssh-server): the SSH tests never skip.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { userInfo } from "node:os";
import { join } from "node:path";

const SSHD = "/usr/sbin/sshd";

export interface Sshd {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  /** The client's private key (OpenSSH format), authorized on the server. */
  readonly privateKey: string;
  readonly privateKeyPath: string;
  /** The server's host key as a public key line (`ssh-ed25519 AAAA… comment`). */
  readonly hostKeyLine: string;
  /** The server's host key fingerprint (`SHA256:…`), as `ssh-keygen -lf` prints it. */
  readonly hostKeyFingerprint: string;
  /** SIGKILL every sshd process serving a connection (not the listener): every session drops. */
  readonly dropSessions: () => number;
  readonly stop: () => Promise<void>;
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });

const keygen = (path: string): void => {
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "holdfast-test", "-f", path], {
    stdio: "ignore",
  });
};

/** Another host key's fingerprint: what a wrong `hostKey` looks like. */
export const otherFingerprint = (dir: string): string => {
  const path = join(dir, "other_host_key");
  keygen(path);
  return fingerprintOf(`${path}.pub`);
};

const fingerprintOf = (publicKeyPath: string): string => {
  const line = execFileSync("ssh-keygen", ["-l", "-E", "sha256", "-f", publicKeyPath], { encoding: "utf8" });
  const found = /SHA256:[A-Za-z0-9+/]+/.exec(line)?.[0];
  if (!found) throw new Error(`ssh-keygen printed no SHA256 fingerprint for ${publicKeyPath}: ${line}`);
  return found;
};

/** Descendants of `root` whose command is sshd (the per-connection processes). */
const sessionProcesses = (root: number): number[] => {
  const parents = new Map<number, number>();
  const names = new Map<number, string>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const name = stat.slice(stat.indexOf("(") + 1, close);
      const ppid = Number(stat.slice(close + 2).split(" ")[1]);
      parents.set(Number(entry), ppid);
      names.set(Number(entry), name);
    } catch {
      // Gone since the listing.
    }
  }
  const below = (pid: number): boolean => {
    let at = parents.get(pid);
    while (at !== undefined && at > 1) {
      if (at === root) return true;
      at = parents.get(at);
    }
    return false;
  };
  return [...parents.keys()].filter((pid) => below(pid) && names.get(pid)?.startsWith("sshd"));
};

/** Start sshd for one test file; `stop` it afterwards. */
export const startSshd = async (dir: string): Promise<Sshd> => {
  if (!existsSync(SSHD)) {
    throw new Error(
      `${SSHD} is missing: the SSH tool's tests need a real OpenSSH server. Install it (apt-get install openssh-server; .ci/run does) and run the tests again.`,
    );
  }
  const user = userInfo().username;
  const hostKey = join(dir, "ssh_host_ed25519_key");
  const clientKey = join(dir, "client_key");
  keygen(hostKey);
  keygen(clientKey);
  const authorized = join(dir, "authorized_keys");
  writeFileSync(authorized, readFileSync(`${clientKey}.pub`), { mode: 0o600 });
  // sshd refuses to start without its privilege separation folder (a package's init script makes it).
  if (process.getuid?.() === 0 && !existsSync("/run/sshd")) mkdirSync("/run/sshd", { mode: 0o755 });
  const port = await freePort();
  const config = join(dir, "sshd_config");
  writeFileSync(
    config,
    [
      `Port ${port}`,
      "ListenAddress 127.0.0.1",
      `HostKey ${hostKey}`,
      `AuthorizedKeysFile ${authorized}`,
      `PidFile ${join(dir, "sshd.pid")}`,
      "StrictModes no",
      "UsePAM no",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "PubkeyAuthentication yes",
      "PermitRootLogin prohibit-password",
      "LogLevel INFO",
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn(SSHD, ["-D", "-e", "-f", config], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on("data", (chunk) => {
      log += chunk;
      if (log.includes("Server listening on")) resolve();
    });
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      reject(new Error(`sshd exited (${code ?? signal}) before it listened on port ${port}:\n${log}`)),
    );
  });
  return {
    host: "127.0.0.1",
    port,
    user,
    privateKey: readFileSync(clientKey, "utf8"),
    privateKeyPath: clientKey,
    hostKeyLine: readFileSync(`${hostKey}.pub`, "utf8").trim(),
    hostKeyFingerprint: fingerprintOf(`${hostKey}.pub`),
    dropSessions: () => {
      const pids = sessionProcesses(child.pid!);
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
      return pids.length;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
};
