import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { CliError, ExitCode } from "./CliError.js";

/**
 * Import a user's ES module given with `--module` (running its top-level code, as the application
 * does). A missing file or a failed import is a one-line error saying what the module must export.
 */
export const importUserModule = async (
  modulePath: string,
  mustExport: string,
): Promise<{ readonly path: string; readonly exported: Record<string, unknown> }> => {
  const path = resolve(modulePath);
  if (!existsSync(path)) {
    throw new CliError(
      ExitCode.failed,
      `there is no module at ${path}`,
      `pass --module with the ES module that exports ${mustExport}`,
    );
  }
  try {
    return { path, exported: (await import(pathToFileURL(path).href)) as Record<string, unknown> };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new CliError(
      ExitCode.failed,
      `cannot import ${path}: ${message}`,
      /\.[cm]?tsx?$/.test(path)
        ? "a TypeScript module needs tsx: run holdfast with NODE_OPTIONS='--import tsx', or point --module at the compiled .js your application loads"
        : "the module must be an ES module that Node can import from here",
    );
  }
};
