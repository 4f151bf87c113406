import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { ALLOWLIST_FILE, loadAllowlist, saveAllowlist } from "../../../allowlist.js";
import { CliError, ExitCode } from "../CliError.js";
import type { Io } from "../Output.js";
import { table } from "../table.js";
import { importUserModule } from "../userModule.js";

export interface AllowlistOptions {
  readonly module: string;
  readonly file?: string;
  /** `allowlist add`: list a replay tool whose pin covers only the text of its `run`, on purpose. */
  readonly runTextOnly?: boolean;
  readonly json?: boolean;
}

/** A tool found in the module: what the safe list cares about. */
interface FoundTool {
  readonly name: string;
  readonly pin: string;
  readonly disposition: string;
  /** The pin covers only the text of `run` (the tool gave no `source`). */
  readonly pinnedByRunText: boolean;
}

export const AUDIT_NOTE =
  "adding a tool means you have audited that running it twice is safe: after a crash, holdfast may run an in-doubt call of it again without asking anyone";

const looksLikeTool = (value: unknown): value is FoundTool & { readonly run: unknown } =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as { name?: unknown }).name === "string" &&
  typeof (value as { pin?: unknown }).pin === "string" &&
  typeof (value as { run?: unknown }).run === "function";

const short = (pin: string): string => pin.slice(0, 12);

/**
 * Import the module and collect every exported tool definition (an export that is one, or an
 * exported array of them). Importing runs the module's top-level code, as the application does.
 */
const toolsOf = async (modulePath: string): Promise<Map<string, FoundTool>> => {
  const { path, exported } = await importUserModule(modulePath, "your tool definitions");
  const found = new Map<string, FoundTool>();
  const add = (value: unknown) => {
    if (!looksLikeTool(value)) return;
    const known = found.get(value.name);
    if (known && known.pin !== value.pin) {
      throw new CliError(
        ExitCode.failed,
        `${path} exports two different tools named "${value.name}" (pins ${short(known.pin)} and ${short(value.pin)})`,
        "tool names must be unique; export one definition per name",
      );
    }
    found.set(value.name, {
      name: value.name,
      pin: value.pin,
      disposition: String((value as { disposition?: unknown }).disposition ?? "hold"),
      pinnedByRunText: (value as { pinnedByRunText?: unknown }).pinnedByRunText === true,
    });
  };
  for (const value of Object.values(exported)) {
    if (Array.isArray(value)) for (const item of value) add(item);
    else add(value);
  }
  return found;
};

const listFile = (file: string | undefined): string => resolve(file ?? ALLOWLIST_FILE);

/** `holdfast allowlist add <tool> --module PATH`: pin the tool's current source in the safe list. */
export const allowlistAddCommand = async (
  tool: string,
  options: AllowlistOptions,
  io: Io,
): Promise<number> => {
  const file = listFile(options.file);
  const tools = await toolsOf(options.module);
  const found = tools.get(tool);
  if (!found) {
    const names = [...tools.keys()].sort();
    throw new CliError(
      ExitCode.failed,
      `${resolve(options.module)} exports no tool named "${tool}"; tools found: ${names.join(", ") || "(none)"}`,
      "export the tool definition itself (e.g. `export const sendEmail = defineTool({ … })`), not only a factory",
    );
  }
  if (found.disposition === "replay" && found.pinnedByRunText && !options.runTextOnly) {
    throw new CliError(
      ExitCode.failed,
      `tool "${tool}" is pinned by the text of its run function only: an edit to a helper it calls or to its argument Schema would not change the pin, so the safe list would go on replaying the changed tool; nothing was written to ${file}`,
      "spread `...moduleSource(import.meta.url)` (from holdfast/tools) into its defineTool so the pin covers its module, or pass --run-text-only if run is all there is to audit",
    );
  }
  const entries = loadAllowlist(file);
  const previous = entries[tool];
  const change = previous === found.pin ? "unchanged" : previous === undefined ? "added" : "re-pinned";
  if (change !== "unchanged") saveAllowlist({ ...entries, [tool]: found.pin }, file);
  const notReplay =
    found.disposition === "replay"
      ? null
      : `tool "${tool}" has disposition "${found.disposition}": the safe list only matters for tools defined with disposition "replay", so its calls are still ${found.disposition === "reconcile" ? "reconciled" : "held"} after a crash`;
  if (options.json) {
    await io.out.json({
      file,
      module: resolve(options.module),
      tool,
      pin: found.pin,
      previousPin: previous ?? null,
      change,
      note: AUDIT_NOTE,
      ...(notReplay ? { warning: notReplay } : {}),
    });
    return ExitCode.ok;
  }
  const what =
    change === "added"
      ? `added ${tool} to ${file}`
      : change === "re-pinned"
        ? `re-pinned ${tool} in ${file} (was ${short(previous ?? "")})`
        : `${tool} is already in ${file} with this pin; nothing changed`;
  await io.out.lines([
    what,
    `  pin ${found.pin}`,
    `note: ${AUDIT_NOTE}.`,
    "      The pin is the SHA-256 of the tool's source as loaded from this module; any change to it",
    "      voids the entry until you audit the tool again and re-add it.",
  ]);
  if (notReplay) await io.out.line(`warning: ${notReplay}`);
  return ExitCode.ok;
};

interface CheckRow {
  readonly tool: string;
  readonly status: "ok" | "mismatch" | "missing";
  readonly listed: string;
  readonly current: string | null;
}

/** `holdfast allowlist check --module PATH`: every listed tool against the module's current pins. */
export const allowlistCheckCommand = async (options: AllowlistOptions, io: Io): Promise<number> => {
  const file = listFile(options.file);
  if (!existsSync(file)) {
    throw new CliError(
      ExitCode.failed,
      `there is no safe list at ${file}`,
      "add a tool with `holdfast allowlist add <tool> --module PATH`, or pass --file",
    );
  }
  const entries = loadAllowlist(file);
  const tools = await toolsOf(options.module);
  const rows: CheckRow[] = Object.entries(entries)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([tool, listed]) => {
      const found = tools.get(tool);
      if (!found) return { tool, status: "missing", listed, current: null };
      return { tool, status: found.pin === listed ? "ok" : "mismatch", listed, current: found.pin };
    });
  const unlisted = [...tools.values()]
    .filter((tool) => tool.disposition === "replay" && entries[tool.name] === undefined)
    .map((tool) => tool.name)
    .sort();
  const problems = rows.filter((row) => row.status !== "ok");
  if (options.json) {
    await io.out.json({
      file,
      module: resolve(options.module),
      ok: problems.length === 0,
      tools: rows,
      unlistedReplayTools: unlisted,
    });
  } else {
    await io.out.line(`safe list ${file}, module ${resolve(options.module)}`);
    if (rows.length === 0) await io.out.line("  the safe list is empty: no tool is replayed after a crash");
    else
      await io.out.line(
        table(
          ["tool", "status", "listed pin", "current pin"],
          rows.map((row) => [
            row.tool,
            row.status === "missing" ? "not in module" : row.status === "mismatch" ? "CHANGED" : "ok",
            short(row.listed),
            row.current === null ? "-" : short(row.current),
          ]),
        ),
      );
    if (unlisted.length > 0) {
      await io.out.line(
        `not listed (they ask for replay, so their calls are recorded as hold): ${unlisted.join(", ")}`,
      );
    }
  }
  if (problems.length > 0) {
    const what = problems.map((row) =>
      row.status === "mismatch"
        ? `${row.tool} changed since it was pinned (listed ${short(row.listed)}, now ${short(row.current ?? "")})`
        : `${row.tool} is listed but the module does not export it`,
    );
    throw new CliError(
      ExitCode.failed,
      `${problems.length} safe-list entr${problems.length === 1 ? "y does" : "ies do"} not match ${resolve(options.module)}: ${what.join("; ")}`,
      "a changed tool is not replayed until you audit it again and re-add it (`holdfast allowlist add <tool> --module …`)",
    );
  }
  if (!options.json) await io.out.line(`every listed tool matches its current source (${rows.length})`);
  return ExitCode.ok;
};
