"""The official evaluator's contract (krafton-ai/VLM-SubtleBench), in one place: everything it reads and writes.

Pure Python, no Django, no database: taxonomy, records and item ids, question rules, leak-free splits and answer
balancing, apportionment, the multiple-choice protocol, the results file and the dataset card. Every app calls
these modules; none rebuilds any of it (tests/test_import_contract.py holds both rules).
"""
