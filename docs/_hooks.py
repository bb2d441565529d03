"""mkdocs hooks of the documentation site (mkdocs.yml): pages that come from elsewhere in the repo.

- The notebooks (``notebooks/*.ipynb``, committed with their outputs) join the site's files as
  ``notebooks/NN_*.ipynb``, before mkdocs-jupyter renders them (this hook runs first).
- ``benchmarks.md`` is generated from ``benchmarks/README.md`` (its "Benchmark" and "Lab notes" sections, written relative to
  ``benchmarks/``) and the tables in ``benchmarks/results/*.md``, so the figures are written in one
  place. Links into ``docs/`` are made relative to the site; links to other files of the
  repository become their path in code.
- Getting started shows the README's Python example; docstrings' Sphinx roles are dropped.
"""

import pathlib
import re

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parents[1]
_HEADING = re.compile(r"^(#{1,6}) (.*)$")
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def _relink(text: str) -> str:
    def sub(match):
        bang, label, target = match.groups()
        if re.match(r"^[a-z]+:|^#", target):
            return match.group(0)
        if target.startswith("../"):  # benchmarks/README.md's links, relative to benchmarks/
            target = target.removeprefix("../")
        elif not target.startswith("docs/"):
            target = "benchmarks/" + target
        if target.startswith("docs/"):
            return f"{bang}[{label}]({target.removeprefix('docs/')})"
        return f"{label} (`{target}`)"

    return _LINK.sub(sub, text)


def _sections(markdown: str, pattern: str) -> list[str]:
    """The sections whose heading matches ``pattern``, each with its subsections, re-levelled so
    that the section's own heading is ``##``."""
    lines, out, level, shift = markdown.splitlines(), [], None, 0
    in_fence = False
    for line in lines:
        if line.startswith("```"):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading and level is not None and len(heading.group(1)) <= level:
            level = None
        if heading and level is None and re.search(pattern, heading.group(2)):
            level = len(heading.group(1))
            shift = 2 - level
            out.append([])
        if level is None:
            continue
        if heading:
            line = "#" * max(2, len(heading.group(1)) + shift) + " " + heading.group(2)
        out[-1].append(line)
    return ["\n".join(section) for section in out]


def benchmarks_page() -> str:
    source = (ROOT / "benchmarks" / "README.md").read_text()
    parts = [_relink(source.split("\n## ", 1)[0]).strip() + "\n"]  # its title and introduction
    parts += [_relink(section) for section in _sections(source, r"^(Benchmark|Lab notes)\b")]
    for table in sorted((ROOT / "benchmarks" / "results").glob("*.md")):
        parts.append(f"## Full results: `benchmarks/results/{table.name}`\n")
        body = re.sub(
            r"^(#{1,6}) (.*)$",
            lambda m: "#" * max(3, len(m.group(1)) + 1) + " " + m.group(2),
            table.read_text(),
            flags=re.M,
        )
        parts.append(_relink(body))
    return "\n\n".join(parts) + "\n"


@event_priority(100)  # before mkdocs-jupyter's on_files, which claims the .ipynb files
def on_files(files, config):
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        files.append(
            File(
                f"notebooks/{path.name}",
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    files.append(File.generated(config, "benchmarks.md", content=benchmarks_page()))
    return files


def on_page_markdown(markdown, page, config, files):
    """Getting started shows the README's Python example (the one tests/test_readme.py runs)."""
    if "<!-- README example -->" in markdown:
        block = re.search(r"```python\n.*?```", (ROOT / "README.md").read_text(), re.S).group(0)
        markdown = markdown.replace("<!-- README example -->", block)
    return markdown


def on_page_content(html, page, config, files):
    """Docstrings name other objects with Sphinx roles (``:func:`iterate_per_row```); the page
    shows the name in code, without the role."""
    return re.sub(r":(?:func|class|meth|mod|attr|data|obj):(<code>)", r"\1", html)
