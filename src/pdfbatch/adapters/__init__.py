"""Adapters: the only modules that talk to boto3, pymysql and redis."""
