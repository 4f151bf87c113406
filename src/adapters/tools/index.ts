export { makeShellTool, ShellArgs, type ShellResult, type ShellToolOptions } from "./shellTool.js";
export { makeWriteFileTool, WriteFileArgs, type WriteFileResult } from "./writeFileTool.js";
