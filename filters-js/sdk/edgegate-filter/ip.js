// IP addresses read and written as the Rust SDK's `std::net::IpAddr` reads and writes them,
// so that a JavaScript filter puts the same text into objects as a Rust one: IPv4 as four
// decimal octets without leading zeros; IPv6 as eight groups (one `::`, an IPv4 tail
// allowed), written in lowercase with the longest run of two or more zero groups as `::`,
// and an IPv4-mapped address as `::ffff:a.b.c.d`.

const OCTET = /^(?:0|[1-9][0-9]{0,2})$/;
const GROUP = /^[0-9a-fA-F]{1,4}$/;

/** The four octets of an IPv4 address, or undefined. */
function parseV4(text) {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((part) => OCTET.test(part) && Number(part) <= 255)) return undefined;
  return parts.map(Number);
}

/** The groups of one side of `::` (`a:b:1.2.3.4`), or undefined; an IPv4 tail only where `tail` allows. */
function parseGroups(text, tail) {
  if (text === '') return [];
  const parts = text.split(':');
  const groups = [];
  for (const [i, part] of parts.entries()) {
    const v4 = tail && i === parts.length - 1 && part.includes('.') ? parseV4(part) : undefined;
    if (v4 !== undefined) {
      groups.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
    } else if (GROUP.test(part)) {
      groups.push(parseInt(part, 16));
    } else {
      return undefined;
    }
  }
  return groups;
}

/** The eight groups of an IPv6 address, or undefined. */
function parseV6(text) {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  if (halves.length === 1) {
    const groups = parseGroups(text, true);
    return groups?.length === 8 ? groups : undefined;
  }
  const head = parseGroups(halves[0], false);
  const tail = parseGroups(halves[1], true);
  // `::` stands for one group or more.
  if (head === undefined || tail === undefined || head.length + tail.length > 7) return undefined;
  return [...head, ...new Array(8 - head.length - tail.length).fill(0), ...tail];
}

/** The text of eight IPv6 groups, as Rust writes it. */
function formatV6(groups) {
  if (groups.slice(0, 6).join() === '0,0,0,0,0,65535') {
    return `::ffff:${groups[6] >> 8}.${groups[6] & 255}.${groups[7] >> 8}.${groups[7] & 255}`;
  }
  let best = { start: 0, length: 0 };
  let run = { start: 0, length: 0 };
  groups.forEach((group, i) => {
    if (group !== 0) {
      run = { start: i + 1, length: 0 };
      return;
    }
    run.length++;
    if (run.length > best.length) best = { ...run };
  });
  const hex = (part) => part.map((group) => group.toString(16)).join(':');
  if (best.length < 2) return hex(groups);
  return `${hex(groups.slice(0, best.start))}::${hex(groups.slice(best.start + best.length))}`;
}

/**
 * An IP address read from text: its version (4 or 6) and its text as Rust writes it; undefined when
 * the text is no IP address (a name, a zone, brackets, leading zeros in an IPv4 octet).
 * @returns {{version: 4 | 6, text: string} | undefined}
 */
export function parseIp(text) {
  if (typeof text !== 'string') return undefined;
  const v4 = parseV4(text);
  if (v4 !== undefined) return { version: 4, text: v4.join('.') };
  const v6 = parseV6(text);
  return v6 === undefined ? undefined : { version: 6, text: formatV6(v6) };
}
