/**
 * A Terraform type as the state stores it (cty's JSON: "string", ["list","string"],
 * ["object",{"a":"number"}], ["tuple",["string","bool"]]) written as Terraform's type constraints
 * are: `list(string)`, `map(number)`, `object({ a = number })`, `tuple([string, bool])`.
 */
export function typeText(type: unknown): string {
  if (typeof type === "string") return type;
  if (!Array.isArray(type) || typeof type[0] !== "string") return JSON.stringify(type) ?? "unknown";
  const [kind, inner] = type as [string, unknown];
  switch (kind) {
    case "list":
    case "set":
    case "map":
      return `${kind}(${typeText(inner)})`;
    case "object": {
      const attributes = inner && typeof inner === "object" ? Object.entries(inner as Record<string, unknown>) : [];
      if (attributes.length === 0) return "object({})";
      return `object({ ${attributes.map(([name, t]) => `${name} = ${typeText(t)}`).join(", ")} })`;
    }
    case "tuple":
      return `tuple([${Array.isArray(inner) ? inner.map(typeText).join(", ") : ""}])`;
    default:
      return JSON.stringify(type);
  }
}
