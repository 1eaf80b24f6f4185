"""The second conversation generator: agent loops, written independently of bench/generator.py.

One to three user messages (English, Portuguese, Chinese or Japanese), then tool rounds with long
outputs (file reads, grep, test logs, stack traces, git logs) that hide facts of other shapes (ids
with suffixes, hashes, versions, exception lines with quoted keys, commands, paths one character
apart, amounts in other currencies and formats) which the agent uses again much later.
`build.generate_loop_suite(seed)` is the entry point; the same seed gives the same conversations.
"""
