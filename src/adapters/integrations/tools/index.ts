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
} from "./browserTool.js";
export type { FileState } from "./fileState.js";
export {
  HttpArgs,
  type HttpLookup,
  type HttpResult,
  type HttpToolOptions,
  makeHttpTool,
} from "./httpTool.js";
export {
  SHELL_ENVIRONMENT_DEFAULTS,
  type ShellEnvironmentOptions,
} from "./shellEnvironment.js";
export { makeShellTool, ShellArgs, type ShellResult, type ShellToolOptions } from "./shellTool.js";
export {
  makeSshTool,
  SshArgs,
  type SshResult,
  type SshTarget,
  type SshToolOptions,
} from "./sshTool.js";
export {
  makeTerminalTool,
  TerminalArgs,
  type TerminalResult,
  type TerminalSessionNote,
  type TerminalTool,
  type TerminalToolOptions,
} from "./terminalTool.js";
export {
  makeWriteFileTool,
  WriteFileArgs,
  type WriteFileResult,
  type WriteFileToolOptions,
} from "./writeFileTool.js";
