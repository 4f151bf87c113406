import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeShellTool, makeWriteFileTool } from "../../src/adapters/integrations/tools/index.js";
import { keyedHash } from "../../src/events/index.js";
import type { CallContext } from "../../src/runtime/define.js";
import { DefiniteFailure } from "../../src/runtime/errors.js";
import { TEST_KEY } from "../tools/calls.js";
import { useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();

/** A work folder inside a fresh temp folder, so the receipts folder beside it is removed too. */
const workDir = (): string => {
  const work = join(tempDir(), "work");
  mkdirSync(work);
  return work;
};
const context: CallContext = {
  runId: "r1",
  chatId: "c1",
  callId: "r1/0",
  attempt: 1,
  idempotencyKey: "r1/0#1",
  signal: new AbortController().signal,
  checkLease: () => {},
  keyedHash: () => keyedHash(TEST_KEY),
};

describe("write_file", () => {
  it("writes inside the work folder, creating folders, with mode 0600, and returns path, bytes and a keyed digest", async () => {
    const work = join(tempDir(), "work");
    const tool = makeWriteFileTool(work);
    const content = "héllo\n";
    const result = await tool.run({ path: "a/b/note.txt", content }, context);
    const bytes = Buffer.from(content, "utf8");
    expect(result).toEqual({
      path: "a/b/note.txt",
      bytes: bytes.byteLength,
      digest: keyedHash(TEST_KEY).update(bytes).digest(),
    });
    expect(readFileSync(join(work, "a", "b", "note.txt"), "utf8")).toBe(content);
    expect(statSync(join(work, "a", "b", "note.txt")).mode & 0o777).toBe(0o600);
  });

  it("tightens an existing file to mode 0600 when it overwrites it", async () => {
    const work = workDir();
    writeFileSync(join(work, "open.txt"), "old");
    chmodSync(join(work, "open.txt"), 0o644);
    await makeWriteFileTool(work).run({ path: "open.txt", content: "new" }, context);
    expect(readFileSync(join(work, "open.txt"), "utf8")).toBe("new");
    expect(statSync(join(work, "open.txt")).mode & 0o777).toBe(0o600);
  });

  it("refuses a path that leaves the work folder as a definite failure, and writes nothing", async () => {
    const dir = tempDir();
    const work = join(dir, "work");
    const tool = makeWriteFileTool(work);
    for (const path of ["../escape.txt", "a/../../escape.txt", join(dir, "escape.txt"), ".", "a/.."]) {
      await expect(tool.run({ path, content: "x" }, context)).rejects.toBeInstanceOf(DefiniteFailure);
    }
    expect(existsSync(join(dir, "escape.txt"))).toBe(false);
  });

  it("refuses to follow a symlink out of the work folder", async () => {
    const dir = tempDir();
    const work = join(dir, "work");
    const outside = join(dir, "outside");
    mkdirSync(work);
    mkdirSync(outside);
    symlinkSync(outside, join(work, "link"));
    symlinkSync(join(outside, "target.txt"), join(work, "file-link"));
    const tool = makeWriteFileTool(work);
    await expect(tool.run({ path: "link/x.txt", content: "x" }, context)).rejects.toBeInstanceOf(
      DefiniteFailure,
    );
    await expect(tool.run({ path: "file-link", content: "x" }, context)).rejects.toBeInstanceOf(
      DefiniteFailure,
    );
    expect(existsSync(join(outside, "x.txt"))).toBe(false);
    expect(existsSync(join(outside, "target.txt"))).toBe(false);
  });

  it("refuses a target that is not a regular file (a folder, a FIFO) as a definite failure, without blocking on it", async () => {
    const work = workDir();
    mkdirSync(join(work, "folder"));
    execFileSync("mkfifo", [join(work, "pipe")]);
    const tool = makeWriteFileTool(work);
    await expect(tool.run({ path: "folder", content: "x" }, context)).rejects.toThrow(/is a directory/);
    await expect(tool.run({ path: "pipe", content: "x" }, context)).rejects.toThrow(/is a fifo/);
    await expect(tool.run({ path: "pipe", content: "x" }, context)).rejects.toBeInstanceOf(DefiniteFailure);
  });

  it("leaves nothing staged in the receipts after a write: the content moved onto the target", async () => {
    const dir = tempDir();
    const work = join(dir, "work");
    await makeWriteFileTool(work).run({ path: "a.txt", content: "secret-ish content" }, context);
    const receipt = join(`${work}.receipts`, "r1_0_1");
    expect(readdirSync(receipt)).toEqual(["start"]);
    expect(readFileSync(join(receipt, "start"), "utf8")).not.toContain("secret-ish");
  });
});

describe("shell", () => {
  it("a command that exits non-zero is still a completed call with its exit code and output", async () => {
    const tool = makeShellTool(workDir());
    const result = await tool.run({ command: "echo out; echo err >&2; exit 3" }, context);
    expect(result).toEqual({ exitCode: 3, stdout: "out\n", stderr: "err\n" });
  });

  it("gives the command the call's idempotency key in $HOLDFAST_IDEMPOTENCY_KEY", async () => {
    const result = await makeShellTool(workDir()).run(
      { command: 'printf %s "$HOLDFAST_IDEMPOTENCY_KEY"' },
      context,
    );
    expect(result.stdout).toBe("r1/0#1");
  });

  it("runs in the work folder", async () => {
    const work = workDir();
    writeFileSync(join(work, "here.txt"), "12345");
    const result = await makeShellTool(work).run({ command: "wc -c < here.txt" }, context);
    expect(result.stdout.trim()).toBe("5");
  });

  it("keeps at most the output limit and says how much was left out", async () => {
    const tool = makeShellTool(workDir(), { maxOutputBytes: 1024 });
    const result = await tool.run({ command: "head -c 5000 /dev/zero | tr '\\0' a" }, context);
    expect(result.stdout.startsWith("a".repeat(1024))).toBe(true);
    expect(result.stdout).toContain("[3976 more bytes not kept]");
  });

  it("a timeout is not a definite failure: the command may have run", async () => {
    const work = workDir();
    const tool = makeShellTool(work, { timeoutMs: 300 });
    const error = await tool.run({ command: "touch started; sleep 5" }, context).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(DefiniteFailure);
    expect((error as Error).message).toContain("timed out");
    expect(existsSync(join(work, "started"))).toBe(true);
  });

  it("a shell that cannot be started is a definite failure", async () => {
    const tool = makeShellTool(join(tempDir(), "missing-folder"));
    await expect(tool.run({ command: "echo hi" }, context)).rejects.toBeInstanceOf(DefiniteFailure);
  });
});
