/**
 * `holdfast/tools` — the built-in tools, each with the reconciler that proves what happened to an
 * in-doubt call, and `moduleSource` to pin your own tools by their module.
 *
 * @example
 * import { openRuntime } from "holdfast";
 * import { makeShellTool, makeWriteFileTool } from "holdfast/tools";
 *
 * const shell = makeShellTool("./work");
 * const writeFile = makeWriteFileTool("./work");
 * const runtime = await openRuntime({ agents: [agent], tools: [shell, writeFile] });
 */

export {
  BrowserActArgs,
  type BrowserAction,
  type BrowserActResult,
  type BrowserProbe,
  type BrowserProbeAnswer,
  type BrowserProbeCall,
  type BrowserProbeVerdict,
  BrowserReadArgs,
  type BrowserReadResult,
  type BrowserToolOptions,
  type BrowserTools,
  makeBrowserTool,
} from "./adapters/integrations/tools/browserTool.js";
export type { FileState } from "./adapters/integrations/tools/fileState.js";
export {
  HttpArgs,
  type HttpLookup,
  type HttpResult,
  type HttpToolOptions,
  makeHttpTool,
} from "./adapters/integrations/tools/httpTool.js";
export { moduleSource } from "./adapters/integrations/tools/moduleSource.js";
export {
  SHELL_ENVIRONMENT_DEFAULTS,
  type ShellEnvironmentOptions,
} from "./adapters/integrations/tools/shellEnvironment.js";
export {
  makeShellTool,
  ShellArgs,
  type ShellResult,
  type ShellToolOptions,
} from "./adapters/integrations/tools/shellTool.js";
export {
  makeSshTool,
  SshArgs,
  type SshResult,
  type SshTarget,
  type SshToolOptions,
} from "./adapters/integrations/tools/sshTool.js";
export {
  makeTerminalTool,
  TerminalArgs,
  type TerminalResult,
  type TerminalSessionNote,
  type TerminalTool,
  type TerminalToolOptions,
} from "./adapters/integrations/tools/terminalTool.js";
export {
  makeWriteFileTool,
  WriteFileArgs,
  type WriteFileResult,
  type WriteFileToolOptions,
} from "./adapters/integrations/tools/writeFileTool.js";
