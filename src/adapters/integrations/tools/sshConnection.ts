import { createHash } from "node:crypto";
import type { Client, ClientChannel, ConnectConfig } from "ssh2";
import { DefiniteFailure } from "../../../runtime/errors.js";
import type { SshTarget } from "./sshTarget.js";

/** `SHA256:<base64 without padding>` of a host key blob, as OpenSSH prints it. */
export const fingerprint = (blob: Buffer): string =>
  `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;

/** What `hostKey` accepts: a fingerprint, or a key blob taken from a public key line. */
type KnownKey = { readonly fingerprint: string } | { readonly blob: Buffer };

const KEY_TYPE = /^(ssh-(rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp\d+|sk-[a-z0-9-]+@openssh\.com)$/;

/** Parse the `hostKey` option; throws naming the value that is neither a fingerprint nor a key. */
export const knownKeys = (hostKey: string | ReadonlyArray<string>): ReadonlyArray<KnownKey> => {
  const values = typeof hostKey === "string" ? [hostKey] : hostKey;
  if (values.length === 0)
    throw new Error("makeSshTool: hostKey is empty; give the server's key or fingerprint");
  return values.map((value) => {
    const text = value.trim();
    if (/^SHA256:[A-Za-z0-9+/]{43}$/.test(text)) return { fingerprint: text };
    const tokens = text.split(/\s+/);
    const at = tokens.findIndex((token) => KEY_TYPE.test(token));
    const encoded = at >= 0 ? tokens[at + 1] : undefined;
    if (encoded && /^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return { blob: Buffer.from(encoded, "base64") };
    throw new Error(
      `makeSshTool: hostKey "${text.slice(0, 60)}" is neither a SHA256 fingerprint (SHA256:…, 43 characters) nor a public key line (ssh-ed25519 AAAA…); get it with \`ssh-keyscan -p PORT HOST | ssh-keygen -lf -\``,
    );
  });
};

const matches = (known: ReadonlyArray<KnownKey>, blob: Buffer): boolean =>
  known.some((key) => ("blob" in key ? key.blob.equals(blob) : key.fingerprint === fingerprint(blob)));

/** `user@host:port`, for messages. */
export const targetName = (target: SshTarget): string => `${target.user}@${target.host}:${target.port ?? 22}`;

/**
 * Open an authenticated connection whose host key is one of `known`. Every failure here is a
 * `DefiniteFailure`: nothing has been sent to run yet. A wrong host key is refused before
 * authentication (no credential is offered to an impostor).
 */
export const connect = async (target: SshTarget, known: ReadonlyArray<KnownKey>): Promise<Client> => {
  const ssh2 = await loadSsh2(target);
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    let presented: string | null = null;
    let settled = false;
    const fail = (message: string) => {
      if (settled) return;
      settled = true;
      client.end();
      reject(new DefiniteFailure(message, { target: targetName(target), sent: false }));
    };
    const config: ConnectConfig = {
      host: target.host,
      port: target.port ?? 22,
      username: target.user,
      readyTimeout: target.readyTimeoutMs ?? 20_000,
      keepaliveInterval: target.keepaliveIntervalMs ?? 10_000,
      keepaliveCountMax: 3,
      hostVerifier: (key: Buffer) => {
        if (matches(known, key)) return true;
        presented = fingerprint(key);
        return false;
      },
    };
    if (target.privateKey !== undefined) config.privateKey = target.privateKey;
    if (target.passphrase !== undefined) config.passphrase = target.passphrase;
    if (target.password !== undefined) config.password = target.password;
    client.once("ready", () => {
      if (settled) return;
      settled = true;
      resolve(client);
    });
    client.on("error", (error: Error & { level?: string }) => {
      if (presented !== null) {
        fail(
          `host key mismatch for ${targetName(target)}: it presented ${presented}, which is not the hostKey given; nothing was sent or run. If the host's key changed on purpose, update hostKey (\`ssh-keyscan -p ${target.port ?? 22} ${target.host} | ssh-keygen -lf -\`)`,
        );
        return;
      }
      // The message of ssh2 never carries the key or the password.
      fail(`could not connect to ${targetName(target)}: ${error.message}; nothing was run`);
    });
    client.once("close", () =>
      fail(`the connection to ${targetName(target)} closed before it was ready; nothing was run`),
    );
    try {
      client.connect(config);
    } catch (error) {
      // A key that does not parse, a missing credential: thrown by connect itself.
      fail(`could not connect to ${targetName(target)}: ${(error as Error).message}; nothing was run`);
    }
  });
};

/**
 * `ssh2`, an optional peer dependency: loaded when the tool first connects, so that holdfast and
 * its other tools install and start without it (it builds native code on install). Missing, the
 * call fails definitely — nothing was sent — saying what to install.
 */
const loadSsh2 = async (target: SshTarget): Promise<typeof import("ssh2")> => {
  try {
    const loaded = (await import("ssh2")) as typeof import("ssh2") & { default?: typeof import("ssh2") };
    return loaded.Client ? loaded : (loaded.default ?? loaded);
  } catch (error) {
    throw new DefiniteFailure(
      `the SSH tool needs the ssh2 package, which is not installed (${(error as Error).message}); install it next to holdfast (\`npm i ssh2@1.17.0\`); nothing was sent to ${targetName(target)}`,
      { target: targetName(target), sent: false },
    );
  }
};

/** Quote one word for a POSIX shell. */
export const shellQuote = (word: string): string => `'${word.replace(/'/g, `'\\''`)}'`;

/** What a remote script printed on its own stdout (not the command's output, which goes to files). */
export interface ScriptOutput {
  readonly stdout: Buffer;
  /** Whether the channel ended normally (the script's exit status was received). */
  readonly exited: boolean;
  readonly code: number | null;
}

/**
 * Run `sh -c script args…` on the connection, send `stdin`, and collect what it prints. Rejects only
 * when the exec request itself fails; a connection lost midway resolves with `exited: false` (the
 * caller decides what that proves). `onChannel` receives the channel, for a timeout to close it.
 */
export const runScript = (
  client: Client,
  script: string,
  args: ReadonlyArray<string>,
  stdin: string,
  onChannel?: (channel: ClientChannel) => void,
): Promise<ScriptOutput> =>
  new Promise((resolve, reject) => {
    const command = ["sh", "-c", script, "holdfast-ssh", ...args].map(shellQuote).join(" ");
    const chunks: Buffer[] = [];
    let code: number | null = null;
    let exited = false;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      resolve({ stdout: Buffer.concat(chunks), exited, code });
    };
    // A connection lost while the channel was open: the channel may never close on its own.
    client.once("close", finish);
    client.exec(command, (error, channel) => {
      if (error) {
        done = true;
        reject(error);
        return;
      }
      onChannel?.(channel);
      channel.on("data", (chunk: Buffer) => chunks.push(chunk));
      channel.stderr.on("data", () => {});
      channel.on("exit", (exitCode: number | null) => {
        exited = true;
        code = exitCode;
      });
      channel.on("close", finish);
      channel.end(stdin);
    });
  });
