/**
 * The template files shipped in this package's `templates/` folder, and the `{{placeholder}}` rendering applied to them.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** One file of a generated package: a path relative to its root (with `/`) and its text. */
export interface GeneratedFile {
  path: string;
  content: string;
}

/** Values for `{{name}}` placeholders. */
export type PlaceholderValues = Readonly<Record<string, string>>;

// src/ in tests and dist/ once built are both one level below the package root, next to templates/.
const TEMPLATES_ROOT = fileURLToPath(new URL("../templates/", import.meta.url));

/**
 * Names stored under another name in `templates/`, because npm leaves a `.gitignore` out of published tarballs.
 */
const STORED_NAMES: Readonly<Record<string, string>> = { gitignore: ".gitignore" };

/** Every file of `templates/<folder>`, rendered with `values`; paths are relative to that folder. */
export function renderTemplateFolder(folder: string, values: PlaceholderValues): GeneratedFile[] {
  const root = path.join(TEMPLATES_ROOT, folder);
  return listFiles(root).map((relative) => {
    const target = relative
      .split("/")
      .map((part) => STORED_NAMES[part] ?? part)
      .join("/");
    return { path: target, content: renderPlaceholders(readFileSync(path.join(root, relative), "utf8"), values, `${folder}/${relative}`) };
  });
}

/** `text` with each `{{name}}` replaced by `values[name]`; an unknown name is a bug in a template, so it throws. */
export function renderPlaceholders(text: string, values: PlaceholderValues, where: string): string {
  return text.replace(/\{\{([A-Za-z][A-Za-z0-9]*)\}\}/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`template ${where} uses {{${name}}}, which has no value`);
    return value;
  });
}

function listFiles(root: string, prefix = ""): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(root, prefix), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const relative = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) out.push(...listFiles(root, relative));
    else if (entry.isFile()) out.push(relative);
  }
  return out;
}
