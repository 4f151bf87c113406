import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  makeTerminalTool,
  type TerminalTool,
  type TerminalToolOptions,
} from "../../src/adapters/integrations/tools/index.js";
import type { CallContext } from "../../src/runtime/define.js";
import { lineOf, runScript, startScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { callContext, checkOf, probeOf } from "./calls.js";

const tempDir = useTempDir();
/** The system's sync, which the test's own sync (first on PATH) calls. */
const SYNC = ["/usr/bin/sync", "/bin/sync"].find((path) => existsSync(path)) ?? "sync";
const WORKER = join(import.meta.dirname, "..", "support", "terminal-worker.ts");

/** Wait (for at most 30 s, a guard against a hang, not a timing claim) until `ready` holds. */
const until = async (ready: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 30_000;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

const opened: TerminalTool[] = [];
afterEach(async () => {
  for (const tool of opened.splice(0)) await tool.close();
});

/** A test's folders: work, receipts, a witness file (one line per execution), a gate file. */
const side = () => {
  const dir = tempDir();
  const work = join(dir, "work");
  mkdirSync(work);
  const receipts = join(dir, "receipts");
  const witness = join(dir, "witness");
  const gate = join(dir, "gate");
  const pidFile = join(dir, "pid");
  const runs = () =>
    existsSync(witness) ? readFileSync(witness, "utf8").split("\n").filter(Boolean).length : 0;
  const folder = (key: string) => join(receipts, key.replace(/[^A-Za-z0-9_.-]/g, "_"));
  return { dir, work, receipts, witness, gate, pidFile, runs, folder };
};

const toolFor = (s: ReturnType<typeof side>, extra: Partial<TerminalToolOptions> = {}) => {
  const tool = makeTerminalTool(s.work, { receiptsDir: s.receipts, ...extra });
  opened.push(tool);
  return tool;
};

const inChat = (key: string, chatId: string): CallContext => ({ ...callContext(key), chatId });

/** A command that records the session's pid, counts itself and waits for the gate. */
const gated = (s: ReturnType<typeof side>) =>
  `echo $$ >'${s.pidFile}'; echo ran >>'${s.witness}'; echo partial; while [ ! -e '${s.gate}' ] && [ -d '${s.dir}' ]; do sleep 0.05; done; echo finished; exit 7`;

const mode = (path: string): string => (statSync(path).mode & 0o777).toString(8);

const settle = <T>(promise: Promise<T>) =>
  promise.then(
    () => null,
    (error: Error) => error,
  );

describe("terminal: one bash per chat in a real pty, every command under receipts", () => {
  it("a command runs once; its exit code and output are read back from the receipts, which are owner-only", async () => {
    const s = side();
    const terminal = toolFor(s);
    expect(terminal.disposition).toBe("reconcile");
    const result = await terminal.run(
      {
        command: `echo ran >>'${s.witness}'; echo "out $HOLDFAST_IDEMPOTENCY_KEY"; echo oops >&2; (exit 3)`,
      },
      callContext("r/0#1"),
    );
    expect(result).toMatchObject({ exitCode: 3, stdout: "out r/0#1\n", stderr: "oops\n" });
    expect(result.session.opened).toBe(true);
    expect(s.runs()).toBe(1);
    const folder = s.folder("r/0#1");
    expect(mode(folder)).toBe("700");
    expect(readdirSync(folder).sort()).toEqual(["exit", "session", "start", "stderr", "stdout"]);
    for (const file of readdirSync(folder)) expect(mode(join(folder, file))).toBe("600");
    expect(JSON.parse(readFileSync(join(folder, "start"), "utf8"))).toMatchObject({
      state: "started",
      key: "r/0#1",
    });
    // The receipts hold the key and the output, never the command.
    for (const file of readdirSync(folder))
      expect(readFileSync(join(folder, file), "utf8")).not.toContain("oops >&2");
    expect(await checkOf(terminal, probeOf(terminal, {}, "r/0#1"), "r/0#1")).toMatchObject({
      outcome: "completed",
      result,
    });
    expect(s.runs()).toBe(1);
  });

  it("state stays between the commands of a chat (cd, export), and a long command with any bytes arrives whole", async () => {
    const s = side();
    mkdirSync(join(s.work, "sub"));
    const terminal = toolFor(s);
    const first = await terminal.run(
      { command: "cd sub && export GREETING='hé \"there\"!'" },
      callContext("r/0#1"),
    );
    const second = await terminal.run({ command: 'pwd; printf "%s\\n" "$GREETING"' }, callContext("r/1#1"));
    expect(second).toMatchObject({ exitCode: 0, stdout: `${join(s.work, "sub")}\nhé "there"!\n` });
    expect(second.session).toEqual({ id: first.session.id, opened: false });
    // Another chat has its own shell.
    const other = await terminal.run({ command: 'pwd; echo "[$GREETING]"' }, inChat("q/0#1", "other"));
    expect(other.stdout).toBe(`${s.work}\n[]\n`);
    expect(other.session.id).not.toBe(first.session.id);
    const text = `${"x\t'\\!$`\u0003é".repeat(1500)}`;
    const long = await terminal.run({ command: `cat <<'EOF'\n${text}\nEOF` }, callContext("r/2#1"));
    expect(long).toMatchObject({ exitCode: 0, stdout: `${text}\n` });
  });

  it("output beyond maxOutputBytes is cut, and says how much was not kept", async () => {
    const s = side();
    const terminal = toolFor(s, { maxOutputBytes: 4 });
    const result = await terminal.run({ command: "printf 0123456789; printf ab >&2" }, callContext("r/0#1"));
    expect(result).toMatchObject({ exitCode: 0, stdout: "0123\n… [6 more bytes not kept]", stderr: "ab" });
  });

  it("what a command sets in its shell cannot break the receipts of the next: PATH, noclobber, errexit, nounset, aliases, IFS", async () => {
    const s = side();
    const terminal = toolFor(s, { timeoutMs: 15_000 });
    const first = await terminal.run(
      { command: "export PATH=/nonexistent; echo done-it" },
      callContext("r/0#1"),
    );
    expect(first).toMatchObject({ exitCode: 0, stdout: "done-it\n" });
    const options = "set -C -e -u; alias eval='echo aliased'; IFS=0123456789; echo set";
    expect(await terminal.run({ command: options }, callContext("r/1#1"))).toMatchObject({ exitCode: 0 });
    // Under noclobber the output files exist already when the command's redirect opens them.
    const second = await terminal.run(
      { command: `echo ran >>'${s.witness}'; echo ok` },
      callContext("r/2#1"),
    );
    expect(second).toMatchObject({ exitCode: 0, stdout: "ok\n", session: { opened: false } });
    expect(s.runs()).toBe(1);
    // Under errexit a failing command ends the shell, as in a terminal: its receipt is written first.
    const failed = await terminal.run({ command: "echo failing; false" }, callContext("r/3#1"));
    expect(failed).toMatchObject({ exitCode: 1, stdout: "failing\n", session: { opened: false } });
    const after = await terminal.run({ command: "echo still" }, callContext("r/4#1"));
    expect(after).toMatchObject({
      exitCode: 0,
      stdout: "still\n",
      session: { opened: true, replaced: { id: first.session.id, why: "bash exited with code 1" } },
    });
  });

  it("a session that sets PATH without the tools the receipts need does not start: a definite failure, nothing run", async () => {
    const s = side();
    const terminal = toolFor(s, {
      env: { set: { PATH: join(s.dir, "empty") } },
      shell: "/bin/bash",
      timeoutMs: 15_000,
    });
    await expect(
      terminal.run({ command: `echo ran >>'${s.witness}'` }, callContext("r/0#1")),
    ).rejects.toMatchObject({ name: "DefiniteFailure", message: expect.stringContaining("did not start") });
    expect(s.runs()).toBe(0);
  });

  it("a hang-up while the exit receipt is written (between sync and rename) waits for it: the receipt is whole and the session then ends", async () => {
    const s = side();
    // A sync that hangs its shell up the first time it syncs an exit receipt.
    const bin = join(s.dir, "bin");
    mkdirSync(bin);
    const mark = join(s.dir, "hung-up");
    writeFileSync(
      join(bin, "sync"),
      `#!/bin/sh\ncase "$1" in *exit.tmp) [ -e '${mark}' ] || { : >'${mark}'; kill -HUP $PPID; } ;; esac\nexec ${SYNC} "$@"\n`,
      { mode: 0o755 },
    );
    const terminal = toolFor(s, { env: { set: { PATH: `${bin}:${process.env.PATH ?? ""}` } } });
    const first = await terminal.run({ command: "echo hi" }, callContext("r/0#1"));
    expect(existsSync(mark)).toBe(true);
    expect(first).toMatchObject({ exitCode: 0, stdout: "hi\n" });
    const next = await terminal.run({ command: "echo again" }, callContext("r/1#1"));
    expect(next).toMatchObject({
      stdout: "again\n",
      session: { opened: true, replaced: { why: "bash exited with code 129" } },
    });
  });

  it("output over 2 GiB is read only up to maxOutputBytes: the outcome is kept", async () => {
    const s = side();
    const terminal = toolFor(s, { maxOutputBytes: 4 });
    // A sparse file: 3 GiB long, nothing written to disk.
    const result = await terminal.run({ command: "truncate -s 3G /dev/stdout" }, callContext("r/0#1"));
    expect(result).toMatchObject({
      exitCode: 0,
      stdout: `\0\0\0\0\n… [${3 * 1024 ** 3 - 4} more bytes not kept]`,
    });
  });

  it("a command that calls exit ends the session with its receipt; the next command opens a new session and says so", async () => {
    const s = side();
    const terminal = toolFor(s);
    const first = await terminal.run({ command: "export KEPT=1; echo bye; exit 5" }, callContext("r/0#1"));
    expect(first).toMatchObject({ exitCode: 5, stdout: "bye\n" });
    const second = await terminal.run({ command: 'echo "[$KEPT]"' }, callContext("r/1#1"));
    expect(second.stdout).toBe("[]\n");
    expect(second.session).toMatchObject({
      opened: true,
      replaced: { id: first.session.id, why: expect.stringContaining("exited with code 5") },
    });
  });

  it("bash killed mid-command: never re-sent, the call is in doubt; start without exit is held; the next command opens a new session", async () => {
    const s = side();
    const terminal = toolFor(s);
    const running = settle(terminal.run({ command: gated(s) }, callContext("r/0#1")));
    await until(() => s.runs() === 1, "the command started");
    const bash = Number(readFileSync(s.pidFile, "utf8"));
    process.kill(bash, "SIGKILL");
    const error = await running;
    expect(error).toBeInstanceOf(Error);
    expect(error?.name).not.toBe("DefiniteFailure");
    expect(error?.message).toMatch(/session was lost .*in doubt/);
    writeFileSync(s.gate, "");
    expect(await checkOf(terminal, probeOf(terminal, {}, "r/0#1"), "r/0#1")).toMatchObject({
      outcome: "unknown",
      evidence: { startReceipt: true, exitReceipt: false },
    });
    const next = await terminal.run({ command: "echo again" }, callContext("r/1#1"));
    expect(next).toMatchObject({ exitCode: 0, stdout: "again\n" });
    expect(next.session).toMatchObject({ opened: true, replaced: { why: "bash was killed by signal 9" } });
    expect(s.runs()).toBe(1);
  });

  it("bash hung up mid-command: held while the running step lasts; once it ends bash writes the exit receipt (129), the rest is not run, and the receipts prove it completed", async () => {
    const s = side();
    const terminal = toolFor(s);
    // The running step ignores SIGHUP (as \`nohup\` would), so it outlives the hang-up.
    const step = `sh -c "trap '' HUP; while [ ! -e '${s.gate}' ] && [ -d '${s.dir}' ]; do sleep 0.05; done; echo step-done"`;
    const command = `echo $$ >'${s.pidFile}'; echo ran >>'${s.witness}'; ${step}; echo never`;
    const running = terminal.run({ command }, callContext("r/0#1"));
    try {
      await until(() => s.runs() === 1, "the command started");
      process.kill(Number(readFileSync(s.pidFile, "utf8")), "SIGHUP");
      const probe = probeOf(terminal, {}, "r/0#1");
      expect(await checkOf(terminal, probe, "r/0#1")).toMatchObject({
        outcome: "unknown",
        evidence: { startReceipt: true, exitReceipt: false },
      });
    } finally {
      writeFileSync(s.gate, "");
    }
    const result = await running;
    expect(result).toMatchObject({ exitCode: 129, stdout: "step-done\n" });
    expect(await checkOf(terminal, probeOf(terminal, {}, "r/0#1"), "r/0#1")).toMatchObject({
      outcome: "completed",
      result,
    });
    const next = await terminal.run({ command: "echo again" }, callContext("r/1#1"));
    expect(next.session).toMatchObject({ opened: true, replaced: { why: "bash exited with code 129" } });
    expect(s.runs()).toBe(1);
  });

  it("a session that dies before it takes the command: the tool voids the attempt itself, a definite failure; nothing ran", async () => {
    const s = side();
    const terminal = toolFor(s);
    // Before its next prompt the shell arms a DEBUG trap that kills it at the next line it reads.
    await terminal.run({ command: `PROMPT_COMMAND='trap "kill -9 \\$\\$" DEBUG'` }, callContext("r/0#1"));
    await expect(
      terminal.run({ command: `echo ran >>'${s.witness}'` }, callContext("r/1#1")),
    ).rejects.toMatchObject({
      name: "DefiniteFailure",
      message: expect.stringContaining("before it took the command"),
    });
    expect(s.runs()).toBe(0);
    expect(await checkOf(terminal, probeOf(terminal, {}, "r/1#1"), "r/1#1")).toMatchObject({
      outcome: "not-completed",
      evidence: { startReceipt: "voided earlier" },
    });
    const next = await terminal.run({ command: "echo fine" }, callContext("r/2#1"));
    expect(next).toMatchObject({ stdout: "fine\n", session: { opened: true } });
  });

  it("law 10: an attempt the reconciler found not started is voided; the session never runs it", async () => {
    const s = side();
    const terminal = toolFor(s);
    expect(await checkOf(terminal, probeOf(terminal, {}, "r/0#1"), "r/0#1")).toMatchObject({
      outcome: "not-completed",
      evidence: { startReceipt: "voided now" },
    });
    await expect(
      terminal.run({ command: `echo ran >>'${s.witness}'` }, callContext("r/0#1")),
    ).rejects.toMatchObject({
      name: "DefiniteFailure",
      message: expect.stringContaining("voided by recovery"),
    });
    expect(s.runs()).toBe(0);
    // The session is still there for the next command.
    const next = await terminal.run({ command: "echo fine" }, callContext("r/1#1"));
    expect(next).toMatchObject({ stdout: "fine\n", session: { opened: false } });
  });

  it("the call's abort (its timeout) hangs the session up: the call is in doubt; the command is stopped and its receipts say 129", async () => {
    const s = side();
    const terminal = toolFor(s);
    const abort = new AbortController();
    const running = settle(
      terminal.run({ command: gated(s) }, { ...callContext("r/0#1"), signal: abort.signal }),
    );
    await until(() => s.runs() === 1, "the command started");
    abort.abort();
    const error = await running;
    expect(error?.name).not.toBe("DefiniteFailure");
    expect(error?.message).toMatch(/was aborted .*hung up.*in doubt/);
    await until(() => existsSync(join(s.folder("r/0#1"), "exit")), "the exit receipt");
    expect(await checkOf(terminal, probeOf(terminal, {}, "r/0#1"), "r/0#1")).toMatchObject({
      outcome: "completed",
      result: { exitCode: 129, stdout: "partial\n" },
    });
    expect(readFileSync(join(s.folder("r/0#1"), "stdout"), "utf8")).not.toContain("finished");
    const next = await terminal.run({ command: "echo again" }, callContext("r/1#1"));
    expect(next.session).toMatchObject({
      opened: true,
      replaced: { why: expect.stringContaining("hung up") },
    });
  });

  it("the tool's own timeout takes the same path: the session is hung up and the call is in doubt", async () => {
    const s = side();
    const terminal = toolFor(s, { timeoutMs: 300 });
    const error = await settle(terminal.run({ command: gated(s) }, callContext("r/0#1")));
    expect(error?.message).toMatch(/timed out after 300 ms.*in doubt/);
    writeFileSync(s.gate, "");
  });
});

const workerEnv = (s: ReturnType<typeof side>, extra: Record<string, string> = {}) => ({
  HF_DB: join(s.dir, "journal.db"),
  HF_WORK: s.work,
  HF_WITNESS: s.witness,
  ...extra,
});

/** The worker's receipts (its tool keeps them in `<work>.receipts`). */
const workerFolders = (s: ReturnType<typeof side>) => {
  const receipts = `${s.work}.receipts`;
  return existsSync(receipts) ? readdirSync(receipts).filter((name) => !name.startsWith(".")) : [];
};

// Each child process pays tsx's start; on a loaded machine that is slow, never wrong.
describe("terminal: the agent's process killed by SIGKILL", () => {
  it("before the start receipt: provably not started (voided), and it runs once after recovery", async () => {
    const s = side();
    const env = workerEnv(s);
    const crashed = await runScript(WORKER, {
      ...env,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "terminal",
    });
    expect(crashed.signal).toBe("SIGKILL");
    expect(s.runs()).toBe(0);
    const recovered = await runScript(WORKER, { ...env, HF_ACTION: "recover" });
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(lineOf(recovered, "recovered")?.results).toEqual([
      expect.objectContaining({
        status: "completed",
        output: { exitCode: 4, stdout: expect.stringMatching(/^done .+\/0#2\n$/), opened: true },
      }),
    ]);
    expect(s.runs()).toBe(1);
    // The voided first attempt keeps its tombstone alone; the second's folder is gone with its outcome.
    const left = workerFolders(s);
    expect(left).toEqual([expect.stringMatching(/_0_1$/)]);
    const tombstone = join(`${s.work}.receipts`, left[0]!);
    expect(readdirSync(tombstone)).toEqual(["start"]);
    expect(JSON.parse(readFileSync(join(tombstone, "start"), "utf8"))).toMatchObject({ state: "voided" });
  }, 240_000);

  it("after the start receipt, with the running step outliving the hang-up: start without exit, the run is held", async () => {
    const s = side();
    const env = workerEnv(s, { HF_GATE: s.gate, HF_NOHUP: "1" });
    try {
      const worker = startScript(WORKER, { ...env, HF_ACTION: "submit" });
      try {
        await until(() => s.runs() === 1, "the command started");
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
      expect(s.runs()).toBe(1);
    } finally {
      // The orphaned step waits for the gate: let it end whatever the assertions said.
      writeFileSync(s.gate, "");
    }
  }, 240_000);

  it("after the start receipt: the closed pty hangs the command up, bash writes 129, and recovery completes the call from the receipts without running it again", async () => {
    const s = side();
    const env = workerEnv(s, { HF_GATE: s.gate });
    try {
      const worker = startScript(WORKER, { ...env, HF_ACTION: "submit" });
      try {
        await until(() => s.runs() === 1, "the command started");
      } finally {
        await worker.kill();
      }
      await until(
        () => workerFolders(s).some((name) => existsSync(join(`${s.work}.receipts`, name, "exit"))),
        "the exit receipt written by the hung-up session",
      );
      const recovered = await runScript(WORKER, { ...env, HF_ACTION: "recover" });
      expect(recovered.code, recovered.stderr).toBe(0);
      expect(lineOf(recovered, "recovered")?.results).toEqual([
        expect.objectContaining({ status: "completed", output: { exitCode: 129, stdout: "", opened: true } }),
      ]);
      expect(s.runs()).toBe(1);
      expect(workerFolders(s)).toEqual([]);
    } finally {
      writeFileSync(s.gate, "");
    }
  }, 240_000);
});
