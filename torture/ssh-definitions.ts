/**
 * The torture's SSH agent (`npm run torture -- --agent ssh`): three commands through the SSH tool
 * (`makeSshTool`) against a real OpenSSH server on 127.0.0.1 that the harness starts for the run
 * (test/support/sshd.ts). Each command appends one line to the outside witness `witness/ssh.txt`
 * itself, on the "remote" host, with its attempt's idempotency key, then takes a moment, so random
 * kills and the harness's dropped connections land while it runs. The tool's disposition is
 * `reconcile`: a call in doubt is read back from its receipts over a new connection, or held.
 *   TORTURE_SSH  JSON: { host, port, user, keyPath, hostKey } (the server the harness started)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { makeSshTool } from "../src/adapters/integrations/tools/index.js";
import { defineAgent } from "../src/index.js";

/** The SSH tool's name in the journal (and for HOLDFAST_CRASH_CALL). */
export const SSH_TOOL = "ssh";
/** Commands per run. */
export const SSH_COMMANDS = 3;

/** Where the harness's SSH server is, as TORTURE_SSH carries it. */
export interface SshTortureTarget {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly keyPath: string;
  readonly hostKey: string;
}

const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;

/** The command of step `step`: the witness line (label and key) first, then a short wait. */
export const witnessCommand = (witness: string, label: string, step: number): string =>
  [
    `printf '%s %s\\n' ${quote(`${label}-cmd-${step}`)} "$HOLDFAST_IDEMPOTENCY_KEY" >>${quote(witness)}`,
    "sleep 0.3",
    `echo ${quote(`${label}-cmd-${step} done`)}`,
  ].join("; ");

export const makeSshTortureDefinitions = ({
  dir,
  target,
}: {
  readonly dir: string;
  readonly target: SshTortureTarget;
}) => {
  const privateKey = readFileSync(target.keyPath, "utf8");
  const ssh = makeSshTool({
    name: SSH_TOOL,
    host: target.host,
    port: target.port,
    user: target.user,
    privateKey,
    hostKey: target.hostKey,
    receiptsDir: join(dir, "ssh-receipts"),
    timeoutMs: 20_000,
  });
  const witness = join(dir, "witness", "ssh.txt");
  const agent = defineAgent({
    name: "torture",
    version: "1",
    run: async (turn, input: { label: string }) => {
      const results: Array<{ exitCode: number; stdout: string }> = [];
      for (let step = 1; step <= SSH_COMMANDS; step++) {
        const done = await turn.tool(ssh, { command: witnessCommand(witness, input.label, step) });
        results.push({ exitCode: done.exitCode, stdout: done.stdout });
      }
      return { results };
    },
  });
  return { agents: [agent], tools: [ssh], allowlist: {}, secrets: { TORTURE_SSH_KEY: privateKey } };
};
