import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeSshTool, type SshToolOptions } from "../../src/adapters/integrations/tools/index.js";
import { byteScan, filesUnder } from "../../torture/byteScan.js";
import { lineOf, runScript, startScript } from "../support/processes.js";
import { otherFingerprint, type Sshd, startSshd } from "../support/sshd.js";
import { useTempDir } from "../support/tmp.js";
import { callContext, checkOf, probeOf } from "./calls.js";

const tempDir = useTempDir();
const WORKER = join(import.meta.dirname, "..", "support", "ssh-worker.ts");

let serverDir: string;
let sshd: Sshd;
beforeAll(async () => {
  serverDir = mkdtempSync(join(tmpdir(), "holdfast-sshd-"));
  sshd = await startSshd(serverDir);
});
afterAll(async () => {
  await sshd?.stop();
  rmSync(serverDir, { recursive: true, force: true });
});

/** Wait (for at most 30 s, a guard against a hang, not a timing claim) until `ready` holds. */
const until = async (ready: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 30_000;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** A test's "remote" side (the server is this machine): receipts, a witness file, a gate file. */
const remote = () => {
  const dir = tempDir();
  const receipts = join(dir, "receipts");
  const witness = join(dir, "witness");
  const gate = join(dir, "gate");
  const runs = () =>
    existsSync(witness) ? readFileSync(witness, "utf8").split("\n").filter(Boolean).length : 0;
  const folder = (key: string) => join(receipts, key.replace(/[^A-Za-z0-9_.-]/g, "_"));
  return { dir, receipts, witness, gate, runs, folder };
};

const toolFor = (receiptsDir: string, extra: Partial<SshToolOptions> = {}) =>
  makeSshTool({
    host: sshd.host,
    port: sshd.port,
    user: sshd.user,
    privateKey: sshd.privateKey,
    hostKey: sshd.hostKeyLine,
    receiptsDir,
    ...extra,
  });

const gated = (witness: string, gate: string) =>
  `echo ran >>'${witness}'; while [ ! -e '${gate}' ]; do sleep 0.05; done; echo finished; exit 7`;

const workerEnv = (side: ReturnType<typeof remote>, gate: boolean) => ({
  HF_DB: join(side.dir, "journal.db"),
  HF_SSH: JSON.stringify({
    host: sshd.host,
    port: sshd.port,
    user: sshd.user,
    keyPath: sshd.privateKeyPath,
    hostKey: sshd.hostKeyFingerprint,
    receiptsDir: side.receipts,
  }),
  HF_WITNESS: side.witness,
  ...(gate ? { HF_GATE: side.gate } : {}),
});

const mode = (path: string): string => (statSync(path).mode & 0o777).toString(8);

// Each child process pays tsx and an SSH handshake; on a loaded machine that is slow, never wrong.
describe("ssh: a command on a real OpenSSH server, reconciled from its remote receipts", () => {
  it("a command runs once and its exit code and output are the outcome; the reconciler reads the same from the receipts", async () => {
    const side = remote();
    const ssh = toolFor(side.receipts);
    expect(ssh.disposition).toBe("reconcile");
    const result = await ssh.run(
      {
        command: `echo ran >>'${side.witness}'; echo "out $HOLDFAST_IDEMPOTENCY_KEY"; echo oops >&2; exit 3`,
      },
      callContext("r/0#1"),
    );
    expect(result).toEqual({ exitCode: 3, stdout: "out r/0#1\n", stderr: "oops\n" });
    expect(side.runs()).toBe(1);
    // The receipts on the remote host: owner-only, start and exit.
    const folder = side.folder("r/0#1");
    expect(mode(folder)).toBe("700");
    expect(readdirSync(folder).sort()).toEqual(["exit", "start", "stderr", "stdout"]);
    for (const file of readdirSync(folder)) expect(mode(join(folder, file))).toBe("600");
    expect(await checkOf(ssh, probeOf(ssh, {}, "r/0#1"), "r/0#1")).toMatchObject({
      outcome: "completed",
      result,
    });
    expect(side.runs()).toBe(1);
  });

  it("output beyond maxOutputBytes is cut, and says how much was not kept", async () => {
    const side = remote();
    const ssh = toolFor(side.receipts, { maxOutputBytes: 4 });
    const result = await ssh.run({ command: "printf 0123456789; printf ab >&2" }, callContext("r/0#1"));
    expect(result).toEqual({ exitCode: 0, stdout: "0123\n… [6 more bytes not kept]", stderr: "ab" });
  });

  it("host key mismatch: a definite refusal before anything is sent; nothing ran and no receipt was written", async () => {
    const side = remote();
    const wrong = otherFingerprint(side.dir);
    const ssh = toolFor(side.receipts, { hostKey: wrong });
    const attempt = ssh.run({ command: `echo ran >>'${side.witness}'` }, callContext("r/0#1"));
    await expect(attempt).rejects.toMatchObject({
      name: "DefiniteFailure",
      message: expect.stringContaining(`it presented ${sshd.hostKeyFingerprint}`),
    });
    expect(side.runs()).toBe(0);
    expect(existsSync(side.receipts)).toBe(false);
    // The reconciler refuses the impostor too: it throws (the run stays held), it never answers.
    await expect(checkOf(ssh, probeOf(ssh, {}, "r/0#1"), "r/0#1")).rejects.toThrow(/host key mismatch/);
    expect(existsSync(side.receipts)).toBe(false);
  });

  it("a dropped connection never re-sends: the call is in doubt; a new connection finds start without exit (unknown), then the exit receipt (completed)", async () => {
    const side = remote();
    const ssh = toolFor(side.receipts, { hostKey: sshd.hostKeyFingerprint });
    try {
      const running = ssh.run({ command: gated(side.witness, side.gate) }, callContext("r/0#1"));
      const settled = running.then(
        () => null,
        (error: Error) => error,
      );
      await until(() => side.runs() === 1, "the command started");
      expect(sshd.dropSessions()).toBeGreaterThan(0);
      const error = await settled;
      expect(error).toBeInstanceOf(Error);
      expect(error?.name).not.toBe("DefiniteFailure");
      expect(error?.message).toMatch(/in doubt/);
      const probe = probeOf(ssh, {}, "r/0#1");
      expect(await checkOf(ssh, probe, "r/0#1")).toMatchObject({
        outcome: "unknown",
        evidence: { startReceipt: true, exitReceipt: false },
      });
      // The command, cut off from its connection, goes on and ends: its exit receipt decides.
      writeFileSync(side.gate, "");
      await until(() => existsSync(join(side.folder("r/0#1"), "exit")), "the exit receipt");
      expect(await checkOf(ssh, probe, "r/0#1")).toMatchObject({
        outcome: "completed",
        result: { exitCode: 7, stdout: "finished\n", stderr: "" },
      });
      expect(side.runs()).toBe(1);
    } finally {
      writeFileSync(side.gate, "");
    }
  });

  it("law 10: an attempt the reconciler found not started is voided on the remote host; its late owner never runs it", async () => {
    const side = remote();
    const ssh = toolFor(side.receipts);
    expect(await checkOf(ssh, probeOf(ssh, {}, "r/0#1"), "r/0#1")).toMatchObject({
      outcome: "not-completed",
      evidence: { startReceipt: "voided now" },
    });
    await expect(
      ssh.run({ command: `echo ran >>'${side.witness}'` }, callContext("r/0#1")),
    ).rejects.toMatchObject({
      name: "DefiniteFailure",
      message: expect.stringContaining("voided by recovery"),
    });
    expect(side.runs()).toBe(0);
    expect(await checkOf(ssh, probeOf(ssh, {}, "r/0#1"), "r/0#1")).toMatchObject({
      outcome: "not-completed",
      evidence: { startReceipt: "voided earlier" },
    });
  });

  it("killed by SIGKILL after its start receipt: recovery over a new connection finds start without exit and holds the run", async () => {
    const side = remote();
    const env = workerEnv(side, true);
    try {
      const worker = startScript(WORKER, { ...env, HF_ACTION: "submit" });
      try {
        await until(() => side.runs() === 1, "the command started");
        expect(existsSync(join(side.folder(readdirSync(side.receipts)[0]!), "start"))).toBe(true);
      } finally {
        await worker.kill();
      }
      const recovered = await runScript(WORKER, { ...env, HF_ACTION: "recover" });
      expect(recovered.code, recovered.stderr).toBe(0);
      const report = lineOf(recovered, "recovery")?.report as { held: Array<{ reasons: unknown[] }> };
      expect(report.held).toEqual([
        expect.objectContaining({
          reasons: [
            expect.objectContaining({
              code: "reconcile-unknown",
              detail: expect.stringMatching(/cannot tell.*"exitReceipt":false.*"startReceipt":true/),
            }),
          ],
        }),
      ]);
      expect(side.runs()).toBe(1);
    } finally {
      // The remote command waits for the gate: let it end whatever the assertions said.
      writeFileSync(side.gate, "");
    }
  }, 240_000);

  it("killed before its start receipt: provably not started (voided on the remote host), runs once after recovery, and the key never reaches the journal", async () => {
    const side = remote();
    const env = workerEnv(side, false);
    const crashed = await runScript(WORKER, {
      ...env,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "ssh",
    });
    expect(crashed.signal).toBe("SIGKILL");
    expect(side.runs()).toBe(0);
    const recovered = await runScript(WORKER, { ...env, HF_ACTION: "recover" });
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(lineOf(recovered, "recovered")?.results).toEqual([
      expect.objectContaining({
        status: "completed",
        output: { exitCode: 4, stdout: expect.stringMatching(/^done .+\/0#2\n$/) },
      }),
    ]);
    expect(side.runs()).toBe(1);
    // The voided first attempt keeps its tombstone alone; the second's folder is removed once its
    // outcome is recorded (asynchronously, over its own connection).
    await until(() => readdirSync(side.receipts).length === 1, "the second attempt's receipts removed");
    const [left] = readdirSync(side.receipts);
    expect(left).toMatch(/_0_1$/);
    expect(readdirSync(join(side.receipts, left!))).toEqual(["start"]);
    expect(JSON.parse(readFileSync(join(side.receipts, left!, "start"), "utf8"))).toMatchObject({
      state: "voided",
    });
    const journal = filesUnder([side.dir]).filter((f) => f.includes("journal.db"));
    expect(journal.length).toBeGreaterThan(0);
    expect(byteScan(journal, { SSH_KEY: sshd.privateKey })).toEqual([]);
  }, 240_000);

  it("a completed run's receipts are removed once its outcome is recorded", async () => {
    const side = remote();
    const env = workerEnv(side, false);
    const run = await runScript(WORKER, { ...env, HF_ACTION: "submit" });
    expect(run.code, run.stderr).toBe(0);
    expect(lineOf(run, "result")?.result).toMatchObject({ status: "completed" });
    expect(side.runs()).toBe(1);
    await until(
      () => !existsSync(side.receipts) || readdirSync(side.receipts).length === 0,
      "receipts removed",
    );
  }, 240_000);
});
