import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * The text of a tool's module, to pin: `run` delegates to helpers in the same file, and a change to
 * any of them must void the allowlist pin too. Empty (the pin falls back to the text of `run`) when
 * the module is not on disk, as in a bundle.
 */
export const moduleSource = (moduleUrl: string): { readonly source?: string } => {
  try {
    return { source: readFileSync(fileURLToPath(moduleUrl), "utf8") };
  } catch {
    return {};
  }
};
